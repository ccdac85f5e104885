package store

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/checkin"
)

// ticketColumns are what the sync feed sends of a registration, for a
// query over registration r joined with its activity a and its record on
// the list c (LEFT JOIN).
const ticketColumns = `r.id, r.public_id, a.public_id, r.user_id, r.seats, r.status IN ('pending', 'awaiting_payment', 'approved'),
	coalesce(c.inside, false), coalesce(c.entries, 0), r.activity_id`

// recordOf is the registration r's record on the list $1, looked up by
// itself (a LATERAL subquery with a LIMIT is planned for one registration,
// both columns of the record's key equal). A plain join with the records
// had a generic plan, made while the door's records were few, that read
// the list's records whole for every registration of a page: 380 ms a
// page of 1,000 at 8,000 check-ins.
const recordOf = `SELECT inside, entries FROM checkin_record WHERE list_id = $1 AND registration_id = r.id LIMIT 1`

// The sync's reads run with their generic plans (readGeneric), as pgx's
// prepared statements would in time anyway, planned under the settings
// that plan_test.go checks.

// syncFullSQL reads a page of every registration of the list $1's
// activities ($2) after a cursor ($3, $4, $5), in the order of
// registration_activity_status_idx (activity, status, id): a page reads
// its rows and no other activity's.
const syncFullSQL = `SELECT ` + ticketColumns + `, r.status FROM registration r JOIN activity a ON a.id = r.activity_id
		LEFT JOIN LATERAL (` + recordOf + `) c ON true
		WHERE r.activity_id = ANY ($2) AND (r.activity_id, r.status, r.id) > ($3, $4, $5)
		ORDER BY r.activity_id, r.status, r.id LIMIT $6`

// syncChangedSQL reads the registrations $2 with their records on the list $1.
const syncChangedSQL = `SELECT ` + ticketColumns + ` FROM registration r JOIN activity a ON a.id = r.activity_id
		LEFT JOIN LATERAL (` + recordOf + `) c ON true
		WHERE r.public_id = ANY ($2)`

func scanTicket(row pgx.CollectableRow) (ticketRow, error) {
	var t ticketRow
	err := row.Scan(&t.id, &t.RegistrationID, &t.ActivityID, &t.UserID, &t.Seats, &t.Valid, &t.Inside, &t.Entries, &t.aid)
	return t, err
}

type ticketRow struct {
	id, aid int64
	status  string
	checkin.TicketState
}

// SyncTickets returns a page of the list's ticket sync feed from cursor
// (nil: the first page of the first sync), and the cursor after it.
func (s *Store) SyncTickets(ctx context.Context, listID string, cursor *checkin.SyncCursor, limit int) (checkin.SyncPage, error) {
	l, err := s.GetCheckinList(ctx, listID)
	if err != nil {
		return checkin.SyncPage{}, err
	}
	aids, err := s.listActivities(ctx, l.Seq)
	if err != nil {
		return checkin.SyncPage{}, err
	}
	if cursor == nil {
		// The activities' seqs before the first page: whatever commits
		// after them comes again as a change.
		seqs, err := s.lastSeqs(ctx, aids)
		if err != nil {
			return checkin.SyncPage{}, err
		}
		cursor = &checkin.SyncCursor{Seqs: seqs, Full: true}
	}
	if cursor.Full {
		return s.syncFull(ctx, l, aids, *cursor, limit)
	}
	return s.syncChanges(ctx, l, aids, *cursor, limit)
}

// listActivities returns the internal ids of a list's activities.
func (s *Store) listActivities(ctx context.Context, list int64) ([]int64, error) {
	rows, err := s.db.Query(ctx, `SELECT activity_id FROM checkin_list_activity WHERE list_id = $1 ORDER BY activity_id`, list)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return out, interpret(err)
}

// lastSeqs returns the last seq of each activity.
func (s *Store) lastSeqs(ctx context.Context, aids []int64) (map[int64]int64, error) {
	out := make(map[int64]int64, len(aids))
	for _, a := range aids {
		out[a] = 0
	}
	rows, err := s.db.Query(ctx, `SELECT activity_id, last_seq FROM activity_state WHERE activity_id = ANY ($1)`, aids)
	if err != nil {
		return nil, interpret(err)
	}
	var aid, seq int64
	_, err = pgx.ForEachRow(rows, []any{&aid, &seq}, func() error {
		out[aid] = seq
		return nil
	})
	return out, interpret(err)
}

// syncFull returns the next page of every registration of the list's
// activities, by internal id.
func (s *Store) syncFull(ctx context.Context, l checkin.List, aids []int64, c checkin.SyncCursor, limit int) (checkin.SyncPage, error) {
	var ts []ticketRow
	err := s.readGeneric(ctx, func(b *pgx.Batch) {
		b.Queue(syncFullSQL, l.Seq, aids, c.AfterActivity, c.AfterStatus, c.After, limit+1).Query(func(rows pgx.Rows) error {
			var status string
			var t ticketRow
			_, err := pgx.ForEachRow(rows, []any{&t.id, &t.RegistrationID, &t.ActivityID, &t.UserID, &t.Seats, &t.Valid, &t.Inside,
				&t.Entries, &t.aid, &status}, func() error {
				t.status = status
				ts = append(ts, t)
				return nil
			})
			return err
		})
	})
	if err != nil {
		return checkin.SyncPage{}, err
	}
	page := checkin.SyncPage{Items: make([]checkin.TicketState, 0, min(len(ts), limit))}
	if len(ts) > limit {
		ts = ts[:limit]
		last := ts[len(ts)-1]
		c.AfterActivity, c.AfterStatus, c.After = last.aid, last.status, last.id
	} else {
		c.Full, c.AfterActivity, c.AfterStatus, c.After = false, 0, "", 0
	}
	for _, t := range ts {
		page.Items = append(page.Items, t.TicketState)
	}
	page.NextCursor = c.Encode()
	return page, nil
}

// syncChanges returns the registrations of the list's activities whose
// events came after the cursor, each once, in the order of their last
// such event, with the cursor after them.
func (s *Store) syncChanges(ctx context.Context, l checkin.List, aids []int64, c checkin.SyncCursor, limit int) (checkin.SyncPage, error) {
	after := make([]int64, len(aids))
	for i, a := range aids {
		after[i] = c.Seqs[a]
	}
	rows, err := s.db.Query(ctx, `SELECT e.activity_id, e.seq, e.registration_id, e.at, e.type LIKE 'block.%'
		FROM unnest($1::bigint[], $2::bigint[]) AS k(aid, after)
		CROSS JOIN LATERAL (SELECT e.activity_id, e.seq, e.registration_id, e.at, e.type FROM registration_event e
			WHERE e.activity_id = k.aid AND e.seq > k.after ORDER BY e.seq LIMIT $3) e`, aids, after, limit)
	if err != nil {
		return checkin.SyncPage{}, interpret(err)
	}
	type change struct {
		aid, seq int64
		reg      string
		at       time.Time
		block    bool
	}
	var chs []change
	var ch change
	if _, err := pgx.ForEachRow(rows, []any{&ch.aid, &ch.seq, &ch.reg, &ch.at, &ch.block}, func() error {
		chs = append(chs, ch)
		return nil
	}); err != nil {
		return checkin.SyncPage{}, interpret(err)
	}
	chs = mergeByTime(chs, func(c change) (int64, time.Time) { return c.aid, c.at }, limit)
	next := checkin.SyncCursor{Seqs: make(map[int64]int64, len(aids))}
	for i, a := range aids {
		next.Seqs[a] = after[i]
	}
	var ids []string
	last := map[string]int{}
	for _, x := range chs {
		next.Seqs[x.aid] = x.seq
		if x.block {
			continue
		}
		if _, ok := last[x.reg]; !ok {
			ids = append(ids, x.reg)
		}
		last[x.reg] = len(last)
	}
	page := checkin.SyncPage{Items: []checkin.TicketState{}, NextCursor: next.Encode()}
	if len(ids) == 0 {
		return page, nil
	}
	var ts []ticketRow
	err = s.readGeneric(ctx, func(b *pgx.Batch) {
		b.Queue(syncChangedSQL, l.Seq, ids).Query(func(rows pgx.Rows) error {
			var err error
			ts, err = pgx.CollectRows(rows, scanTicket)
			return err
		})
	})
	if err != nil {
		return checkin.SyncPage{}, err
	}
	order := make(map[string]int, len(ids))
	for i, id := range ids {
		order[id] = i
	}
	slices.SortFunc(ts, func(a, b ticketRow) int { return cmp.Compare(order[a.RegistrationID], order[b.RegistrationID]) })
	for _, t := range ts {
		page.Items = append(page.Items, t.TicketState)
	}
	return page, nil
}

// mergeByTime merges the events of several activities, each in seq order
// in evs, taking at each step the earliest head: the first limit it
// returns hold a prefix of each activity's events (a cursor after them
// skips nothing), in about the order they happened.
func mergeByTime[T any](evs []T, key func(T) (int64, time.Time), limit int) []T {
	var order []int64
	queues := map[int64][]T{}
	for _, e := range evs {
		a, _ := key(e)
		if _, ok := queues[a]; !ok {
			order = append(order, a)
		}
		queues[a] = append(queues[a], e)
	}
	out := make([]T, 0, min(len(evs), limit))
	for len(out) < limit {
		best := int64(-1)
		var bestAt time.Time
		for _, a := range order {
			if q := queues[a]; len(q) > 0 {
				if _, at := key(q[0]); best < 0 || at.Before(bestAt) {
					best, bestAt = a, at
				}
			}
		}
		if best < 0 {
			break
		}
		out = append(out, queues[best][0])
		queues[best] = queues[best][1:]
	}
	return out
}
