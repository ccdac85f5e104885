package store

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
)

// Redeem decides and records one scan at a list, in one transaction:
//
//	lock the list's row (every scan of the list, on any instance, waits here)
//	a retried Idempotency-Key answers its first check-in
//	find the registration; lock its activity (as every seat change does)
//	read the registration, its record on the list and the activity's last seq
//	checkin.Decide
//	INSERT the check-in and its event; UPDATE the record, the list's counts, the activity's last seq
//
// The list's lock comes before the activity's: no transaction takes a
// list's lock while it holds an activity's, so the two orders never
// deadlock. A refusal writes nothing.
func (s *Store) Redeem(ctx context.Context, in checkin.Redemption, now time.Time) (checkin.Redeemed, error) {
	var out checkin.Redeemed
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		l, err := lockList(ctx, tx, in.ListID)
		if err != nil {
			return err
		}
		if in.Allowed != nil {
			if err := in.Allowed(l); err != nil {
				return err
			}
		}
		if in.IdempotencyKey != "" {
			done, err := replayCheckin(ctx, tx, l, in)
			if err != nil || done.Result != "" {
				out = done
				return err
			}
		}
		rid, aid, err := findScanned(ctx, tx, in)
		if err != nil {
			return err
		}
		if err := LockActivity(ctx, tx, aid); err != nil {
			return err
		}
		reg, rec, lastSeq, err := readScanned(ctx, tx, l.Seq, rid, aid)
		if err != nil {
			return err
		}
		scan := in.Scan
		if scan.At.IsZero() {
			scan.At = now
		}
		// As PostgreSQL keeps it: the answer and its replays agree.
		scan.At = scan.At.Truncate(time.Microsecond)
		v := checkin.Decide(l, reg, rec, scan)
		if v.Refusal != nil {
			return v.Refusal
		}
		out, err = writeCheckin(ctx, tx, l, reg, rid, aid, lastSeq, scan, v, in, now)
		return err
	})
	return out, err
}

// findScanned returns the internal ids of the scanned registration and
// its activity.
func findScanned(ctx context.Context, tx pgx.Tx, in checkin.Redemption) (rid, aid int64, err error) {
	var act string
	err = tx.QueryRow(ctx, `SELECT r.id, r.activity_id, a.public_id FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE r.public_id = $1`, in.RegistrationID).Scan(&rid, &aid, &act)
	switch {
	case errors.Is(err, pgx.ErrNoRows) && in.ByTicket:
		return 0, 0, checkin.InvalidTicket("it names no registration of this service")
	case errors.Is(err, pgx.ErrNoRows):
		return 0, 0, registration.RegistrationNotFound(in.RegistrationID)
	case err != nil:
		return 0, 0, err
	case in.TicketActivity != "" && in.TicketActivity != act:
		return 0, 0, checkin.InvalidTicket("its activity is not its registration's")
	}
	return rid, aid, nil
}

// readScanned reads, under the activity's lock, the registration, its
// record on the list and the activity's last seq.
func readScanned(ctx context.Context, tx pgx.Tx, list, rid, aid int64) (registration.Registration, checkin.Record, int64, error) {
	b := &pgx.Batch{}
	var reg registration.Registration
	var rec checkin.Record
	var lastSeq int64
	b.Queue(`SELECT `+registrationColumns+` FROM registration r JOIN activity a ON a.id = r.activity_id WHERE r.id = $1`, rid).
		QueryRow(func(row pgx.Row) error {
			var err error
			reg, err = scanRegistration(row)
			return err
		})
	b.Queue(`SELECT inside, inside_seats, entries, exits, first_at, first_device FROM checkin_record
		WHERE list_id = $1 AND registration_id = $2`, list, rid).QueryRow(func(row pgx.Row) error {
		var device *string
		err := row.Scan(&rec.Inside, &rec.InsideSeats, &rec.Entries, &rec.Exits, &rec.FirstAt, &device)
		if device != nil {
			rec.FirstDevice = *device
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	b.Queue(`SELECT coalesce((SELECT last_seq FROM activity_state WHERE activity_id = $1), 0)`, aid).QueryRow(func(row pgx.Row) error {
		return row.Scan(&lastSeq)
	})
	err := tx.SendBatch(ctx, b).Close()
	return reg, rec, lastSeq, err
}

// writeCheckin records a decided scan: the check-in, its event, the
// registration's record and the list's counts.
func writeCheckin(ctx context.Context, tx pgx.Tx, l checkin.List, reg registration.Registration, rid, aid, lastSeq int64,
	scan checkin.Scan, v checkin.Verdict, in checkin.Redemption, now time.Time) (checkin.Redeemed, error) {
	ci := checkin.CheckIn{Seq: l.LastSeq + 1, ListID: l.ID, RegistrationID: reg.ID, ActivityID: reg.ActivityID, UserID: reg.UserID,
		Seats: max(reg.Seats, 1), Type: scan.Type, At: scan.At.UTC(), Device: scan.Device, Forced: scan.Force}
	ci.ID = checkin.CheckInID(l.ID, ci.Seq)
	if v.Conflict != "" {
		c := v.Conflict
		ci.Conflict = &c
	}
	if scan.Type == checkin.TypeEntry {
		reg.CheckedIn = true
	}
	ev := checkin.EventOf(ci, reg, in.Origin)
	ev.Seq = lastSeq + 1
	ev.ID = registration.EventID(reg.ActivityID, ev.Seq)
	var key *string
	if in.IdempotencyKey != "" {
		key = &in.IdempotencyKey
	}
	rec := v.Record
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO checkin (list_id, seq, registration_id, activity_id, type, at, recorded_at, device, forced, conflict, seats, actor,
			idempotency_key, request_hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		l.Seq, ci.Seq, rid, aid, string(ci.Type), ci.At, now, ci.Device, ci.Forced, ci.Conflict, ci.Seats, in.Origin.Actor, key, in.RequestHash)
	b.Queue(`INSERT INTO checkin_record (list_id, registration_id, inside, inside_seats, entries, exits, first_at, first_device)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (list_id, registration_id) DO UPDATE SET inside = excluded.inside, inside_seats = excluded.inside_seats,
			entries = excluded.entries, exits = excluded.exits, first_at = excluded.first_at, first_device = excluded.first_device`,
		l.Seq, rid, rec.Inside, rec.InsideSeats, rec.Entries, rec.Exits, rec.FirstAt, nullable(rec.FirstDevice))
	b.Queue(`UPDATE checkin_list SET checked_in = $2, inside = $3, conflicts = $4, last_seq = $5 WHERE id = $1`,
		l.Seq, v.CheckedIn, v.Inside, v.Conflicts, ci.Seq)
	if scan.Type == checkin.TypeEntry {
		b.Queue(`UPDATE registration SET checked_in = true WHERE id = $1 AND NOT checked_in`, rid)
	}
	b.Queue(`INSERT INTO registration_event (activity_id, seq, registration_id, user_id, type, from_status, to_status, actor, request_id, at,
			seats, block_id, list_id, device, forced, conflict)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		aid, ev.Seq, ev.RegistrationID, ev.UserID, string(ev.Type), string(reg.Status), string(ev.To), ev.Actor, ev.RequestID, ev.At,
		ev.Seats, ev.BlockID, l.ID, ci.Device, ci.Forced, ci.Conflict)
	b.Queue(`INSERT INTO activity_state (activity_id, last_seq) VALUES ($1, $2)
		ON CONFLICT (activity_id) DO UPDATE SET last_seq = excluded.last_seq`, aid, ev.Seq)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return checkin.Redeemed{}, err
	}
	l.CheckedIn, l.Inside, l.Conflicts, l.LastSeq = v.CheckedIn, v.Inside, v.Conflicts, ci.Seq
	result := checkin.ResultEntered
	if scan.Type == checkin.TypeExit {
		result = checkin.ResultExited
	}
	return checkin.Redeemed{Result: result, Registration: reg, CheckIn: ci, List: l, Event: ev}, nil
}

// nullable returns nil for "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// replayCheckin answers a scan whose Idempotency-Key the list recorded:
// the same check-in, with the registration and the list as they are now.
// A zero Redeemed means the key is new.
func replayCheckin(ctx context.Context, tx pgx.Tx, l checkin.List, in checkin.Redemption) (checkin.Redeemed, error) {
	var seq int64
	var hash []byte
	err := tx.QueryRow(ctx, `SELECT seq, request_hash FROM checkin WHERE list_id = $1 AND idempotency_key = $2`,
		l.Seq, in.IdempotencyKey).Scan(&seq, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return checkin.Redeemed{}, nil
	}
	if err != nil {
		return checkin.Redeemed{}, err
	}
	if !bytes.Equal(hash, in.RequestHash) {
		return checkin.Redeemed{}, capacityd.Errorf(capacityd.EIdempotencyConflict,
			"Idempotency-Key %q was used with a different scan on this list", in.IdempotencyKey)
	}
	cis, err := checkinsOf(ctx, tx, l, seq-1, 1)
	if err != nil || len(cis) == 0 {
		return checkin.Redeemed{}, errors.Join(err, errors.New("store: a recorded check-in is missing"))
	}
	ci := cis[0]
	reg, err := scanRegistration(tx.QueryRow(ctx, `SELECT `+registrationColumns+` FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE r.public_id = $1`, ci.RegistrationID))
	if err != nil {
		return checkin.Redeemed{}, err
	}
	result := checkin.ResultEntered
	if ci.Type == checkin.TypeExit {
		result = checkin.ResultExited
	}
	return checkin.Redeemed{Result: result, Registration: reg, CheckIn: ci, List: l, Replayed: true}, nil
}

// checkinColumns are a check-in's columns, for a query over checkin c
// joined with its registration r and activity a.
const checkinColumns = `c.seq, r.public_id, a.public_id, r.user_id, c.seats, c.type, c.at, c.device, c.forced, c.conflict`

// checkinsOf returns up to limit of the list's check-ins after seq after.
func checkinsOf(ctx context.Context, q querier, l checkin.List, after int64, limit int) ([]checkin.CheckIn, error) {
	rows, err := q.Query(ctx, `SELECT `+checkinColumns+` FROM checkin c JOIN registration r ON r.id = c.registration_id
		JOIN activity a ON a.id = c.activity_id
		WHERE c.list_id = $1 AND c.seq > $2 ORDER BY c.seq LIMIT $3`, l.Seq, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (checkin.CheckIn, error) {
		ci := checkin.CheckIn{ListID: l.ID}
		err := row.Scan(&ci.Seq, &ci.RegistrationID, &ci.ActivityID, &ci.UserID, &ci.Seats, &ci.Type, &ci.At, &ci.Device, &ci.Forced, &ci.Conflict)
		ci.ID, ci.At = checkin.CheckInID(l.ID, ci.Seq), ci.At.UTC()
		return ci, err
	})
}

// Checkins returns up to limit of a list's check-ins after seq after, in
// commit order.
func (s *Store) Checkins(ctx context.Context, listID string, after int64, limit int) ([]checkin.CheckIn, error) {
	l, err := s.GetCheckinList(ctx, listID)
	if err != nil {
		return nil, err
	}
	out, err := checkinsOf(ctx, s.db, l, after, limit)
	return out, interpret(err)
}

// querier is what reads take: the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}
