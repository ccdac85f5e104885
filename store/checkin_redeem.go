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

// RedeemBatch decides and records the scans of one list, in order, in
// one transaction (the scans of many devices gathered while the list's
// last transaction ran), in three round trips:
//
//	BEGIN; lock the list's row (every scan of the list, on any instance,
//	  waits here); generic plans from here on (genericPlans); the check-ins
//	  the batch's Idempotency-Keys recorded; pg_advisory_xact_lock of the
//	  scanned registrations' activities, in id order (the lock of every seat
//	  change); then, under the locks, the registrations, their records on
//	  the list and the activities' last seqs                                   -- one round trip
//	checkin.Decide, scan after scan
//	INSERT the check-ins and their events; UPDATE the records (a
//	  registration's checked_in is read from them), the list's counts, the
//	  activities' last seqs                                                    -- one more
//	COMMIT (see txn.commit)                                                    -- one more
//
// The statements of a round trip run one after the other, each with its
// own snapshot: what is read after a lock is read under it. A
// registration's activity never changes, so its lock can be named by a
// read before it. The list's lock comes before the activities': no
// transaction takes a list's lock while it holds an activity's, so the two
// orders never deadlock. A refused scan writes nothing and is answered
// alone; an error of the transaction fails the whole batch.
func (s *Store) RedeemBatch(ctx context.Context, listID string, ins []checkin.Redemption, now time.Time) ([]checkin.RedeemOutcome, error) {
	var out []checkin.RedeemOutcome
	err := s.pipelined(ctx, func(t *txn) error {
		out = make([]checkin.RedeemOutcome, len(ins))
		b := &redeemBatch{ins: ins, out: out, now: now}
		if err := b.read(ctx, t, listID, s.timeouts); err != nil {
			return err
		}
		firstOfKey := map[string]int{}
		for i, in := range b.ins {
			b.decide(i, in, firstOfKey)
		}
		if err := b.fillReplays(); err != nil {
			return err
		}
		return t.commit(ctx, b.writes.batch(b.list))
	})
	return out, err
}

// redeemBatch is the state of one RedeemBatch transaction.
type redeemBatch struct {
	ins []checkin.Redemption
	out []checkin.RedeemOutcome
	now time.Time

	list    checkin.List
	replays map[string]recorded // by Idempotency-Key
	found   map[string]scanned  // by registration public id
	regs    map[int64]*registration.Registration
	records map[int64]checkin.Record
	seqs    map[int64]int64 // activity → last seq
	writes  checkinWrites
}

// recorded is a check-in an Idempotency-Key recorded earlier.
type recorded struct {
	checkin.CheckIn
	hash []byte
}

// scanned is a registration a scan names, as read under the locks.
type scanned struct {
	rid, aid int64
	act      string
}

// read sends the transaction's first round trip (see RedeemBatch).
func (b *redeemBatch) read(ctx context.Context, t *txn, listID string, timeouts []string) error {
	var keys, ids []string
	for _, in := range b.ins {
		if in.IdempotencyKey != "" {
			keys = append(keys, in.IdempotencyKey)
		}
		ids = append(ids, in.RegistrationID)
	}
	b.replays, b.found = map[string]recorded{}, map[string]scanned{}
	b.regs, b.records, b.seqs = map[int64]*registration.Registration{}, map[int64]checkin.Record{}, map[int64]int64{}
	pb := &pgx.Batch{}
	t.begin(pb, timeouts)
	pb.Queue(lockListSQL, listID).QueryRow(func(row pgx.Row) error {
		l, err := scanList(row)
		b.list = l
		return listFound(err, listID)
	})
	// The rest of the transaction runs with generic plans (genericPlans):
	// its statements over lists of ids were planned again at every
	// execution, planning costing about as much as running them.
	pb.Queue(genericPlans)
	if len(keys) > 0 {
		b.queueReplays(pb, listID, keys)
	}
	pb.Queue(`SELECT count(pg_advisory_xact_lock($1::int, k.aid::int)) FROM (SELECT DISTINCT r.activity_id AS aid FROM registration r
		WHERE r.public_id = ANY ($2) ORDER BY 1) AS k`, int32(admissionLockNamespace), ids)
	pb.Queue(`SELECT `+registrationColumns+`, r.activity_id FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE r.public_id = ANY ($1)`, ids).Query(func(rows pgx.Rows) error {
		return scanEach(rows, func(aid int64, reg registration.Registration) {
			b.found[reg.ID] = scanned{rid: reg.Seq, aid: aid, act: reg.ActivityID}
			b.regs[reg.Seq] = &reg
		})
	})
	// Each record is looked up by itself: a LATERAL subquery with a LIMIT
	// is planned for one registration, both columns of the record's key
	// equal. With "registration_id = ANY (…)", a generic plan made while
	// the table was small read the list's whole range and filtered it.
	pb.Queue(`SELECT r.id, c.inside, c.inside_seats, c.entries, c.exits, c.first_at, coalesce(c.first_device, '')
		FROM registration r
		CROSS JOIN LATERAL (SELECT * FROM checkin_record WHERE list_id = (SELECT id FROM checkin_list WHERE public_id = $1)
			AND registration_id = r.id LIMIT 1) c
		WHERE r.public_id = ANY ($2)`, listID, ids).Query(func(rows pgx.Rows) error {
		var rid int64
		var rec checkin.Record
		_, err := pgx.ForEachRow(rows, []any{&rid, &rec.Inside, &rec.InsideSeats, &rec.Entries, &rec.Exits, &rec.FirstAt, &rec.FirstDevice},
			func() error {
				b.records[rid] = rec
				rec = checkin.Record{}
				return nil
			})
		return err
	})
	// An activity without a state has recorded no event: its last seq is
	// 0, the map's zero.
	pb.Queue(`SELECT s.activity_id, s.last_seq FROM activity_state s
		WHERE s.activity_id = ANY (ARRAY(SELECT r.activity_id FROM registration r WHERE r.public_id = ANY ($1)))`,
		ids).Query(func(rows pgx.Rows) error {
		var aid, seq int64
		_, err := pgx.ForEachRow(rows, []any{&aid, &seq}, func() error {
			b.seqs[aid] = seq
			return nil
		})
		return err
	})
	return t.conn.SendBatch(ctx, pb).Close()
}

// queueReplays reads the check-ins the batch's keys recorded earlier,
// each key looked up by itself (a LATERAL subquery with a LIMIT is planned
// for one key, both columns of checkin_idempotency_idx equal: with
// "idempotency_key = ANY (…)" the generic plan made while the table was
// small read the list's whole range and filtered it by the keys).
func (b *redeemBatch) queueReplays(pb *pgx.Batch, listID string, keys []string) {
	pb.Queue(`SELECT k.key, c.request_hash, `+checkinColumns+` FROM unnest($2::text[]) AS k(key)
		CROSS JOIN LATERAL (SELECT * FROM checkin WHERE list_id = (SELECT id FROM checkin_list WHERE public_id = $1)
			AND idempotency_key = k.key LIMIT 1) c
		JOIN registration r ON r.id = c.registration_id JOIN activity a ON a.id = c.activity_id`,
		listID, keys).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var key string
			var r recorded
			if err := rows.Scan(append([]any{&key, &r.hash}, checkinDest(&r.CheckIn)...)...); err != nil {
				return err
			}
			completeCheckin(&r.CheckIn, listID)
			b.replays[key] = r
		}
		return rows.Err()
	})
}

// decide answers scan i: a replay of its key, a refusal, or a check-in
// recorded in the batch's writes (the list, records and registrations in
// memory move with it, for the scans after it).
func (b *redeemBatch) decide(i int, in checkin.Redemption, firstOfKey map[string]int) {
	if in.Allowed != nil {
		if err := in.Allowed(b.list); err != nil {
			b.out[i].Err = err
			return
		}
	}
	if k := in.IdempotencyKey; k != "" {
		if r, ok := b.replays[k]; ok {
			b.out[i] = replayOf(r.hash, r.CheckIn, in)
			return
		}
		if j, ok := firstOfKey[k]; ok {
			b.out[i] = replayOf(b.ins[j].RequestHash, b.out[j].CheckIn, in)
			if b.out[j].Err != nil {
				b.out[i] = b.out[j]
			}
			return
		}
		firstOfKey[k] = i
	}
	f, ok := b.found[in.RegistrationID]
	switch {
	case !ok && in.ByTicket:
		b.out[i].Err = checkin.InvalidTicket("it names no registration of this service")
		return
	case !ok:
		b.out[i].Err = registration.RegistrationNotFound(in.RegistrationID)
		return
	case in.TicketActivity != "" && in.TicketActivity != f.act:
		b.out[i].Err = checkin.InvalidTicket("its activity is not its registration's")
		return
	}
	reg := b.regs[f.rid]
	scan := in.Scan
	if scan.At.IsZero() {
		scan.At = b.now
	}
	// As PostgreSQL keeps it: the answer and its replays agree.
	scan.At = scan.At.UTC().Truncate(time.Microsecond)
	v := checkin.Decide(b.list, *reg, b.records[f.rid], scan)
	if v.Refusal != nil {
		b.out[i].Err = v.Refusal
		return
	}
	b.records[f.rid] = v.Record
	b.list.CheckedIn, b.list.Inside, b.list.Conflicts = v.CheckedIn, v.Inside, v.Conflicts
	b.list.LastSeq++
	b.seqs[f.aid]++
	ci := checkin.CheckIn{Seq: b.list.LastSeq, ListID: b.list.ID, RegistrationID: reg.ID, ActivityID: reg.ActivityID,
		UserID: reg.UserID, Seats: max(reg.Seats, 1), Type: scan.Type, At: scan.At, Device: scan.Device, Forced: scan.Force}
	ci.ID = checkin.CheckInID(b.list.ID, ci.Seq)
	if v.Conflict != "" {
		c := v.Conflict
		ci.Conflict = &c
	}
	if scan.Type == checkin.TypeEntry {
		reg.CheckedIn = true
	}
	ev := checkin.EventOf(ci, *reg, in.Origin)
	ev.Seq, ev.ID = b.seqs[f.aid], registration.EventID(reg.ActivityID, b.seqs[f.aid])
	b.writes.add(f, ci, v.Record, ev, in)
	result := checkin.ResultEntered
	if scan.Type == checkin.TypeExit {
		result = checkin.ResultExited
	}
	b.out[i] = checkin.RedeemOutcome{Redeemed: checkin.Redeemed{Result: result, Registration: *reg, CheckIn: ci, Event: ev}}
}

// replayOf answers a scan whose key recorded check-in ci (its
// registration is filled in by fillReplays), or refuses a key reused for
// another scan.
func replayOf(hash []byte, ci checkin.CheckIn, in checkin.Redemption) checkin.RedeemOutcome {
	if !bytes.Equal(hash, in.RequestHash) {
		return checkin.RedeemOutcome{Err: capacityd.Errorf(capacityd.EIdempotencyConflict,
			"Idempotency-Key %q was used with a different scan on this list", in.IdempotencyKey)}
	}
	return checkin.RedeemOutcome{Redeemed: checkin.Redeemed{Replayed: true, CheckIn: ci}}
}

// fillReplays sets every answer's list, as the batch leaves it, and the
// replayed answers' results and registrations, as they are now (read
// under their activities' locks: a retried scan names the registration
// its first did).
func (b *redeemBatch) fillReplays() error {
	for i := range b.out {
		o := &b.out[i]
		o.List = b.list
		if !o.Replayed {
			continue
		}
		o.Result = checkin.ResultEntered
		if o.CheckIn.Type == checkin.TypeExit {
			o.Result = checkin.ResultExited
		}
		f, ok := b.found[o.CheckIn.RegistrationID]
		if !ok || b.regs[f.rid] == nil {
			return errors.New("store: a replayed check-in's registration was not read")
		}
		o.Registration = *b.regs[f.rid]
	}
	return nil
}

// checkinWrites collects a batch's writes as columns.
type checkinWrites struct {
	seqs, rids, aids                   []int64
	types, devices, actors, regIDs     []string
	at                                 []time.Time
	forced                             []bool
	conflicts, keys                    []*string
	hashes                             [][]byte
	seats                              []int32
	records                            map[int64]checkin.Record
	evSeqs                             []int64
	evUsers, evTypes, evStatus, evReqs []string
	evBlocks                           []*string
	lastSeqs                           map[int64]int64
}

func (w *checkinWrites) add(f scanned, ci checkin.CheckIn, rec checkin.Record, ev registration.Event, in checkin.Redemption) {
	if w.records == nil {
		w.records, w.lastSeqs = map[int64]checkin.Record{}, map[int64]int64{}
	}
	w.seqs, w.rids, w.aids = append(w.seqs, ci.Seq), append(w.rids, f.rid), append(w.aids, f.aid)
	w.types, w.devices, w.actors = append(w.types, string(ci.Type)), append(w.devices, ci.Device), append(w.actors, in.Origin.Actor)
	w.at, w.forced, w.conflicts = append(w.at, ci.At), append(w.forced, ci.Forced), append(w.conflicts, ci.Conflict)
	w.keys, w.hashes, w.seats = append(w.keys, nullable(in.IdempotencyKey)), append(w.hashes, in.RequestHash), append(w.seats, int32(ci.Seats))
	w.records[f.rid] = rec
	w.regIDs, w.evSeqs, w.evUsers = append(w.regIDs, ev.RegistrationID), append(w.evSeqs, ev.Seq), append(w.evUsers, ev.UserID)
	w.evTypes, w.evStatus, w.evReqs = append(w.evTypes, string(ev.Type)), append(w.evStatus, string(ev.To)), append(w.evReqs, ev.RequestID)
	w.evBlocks = append(w.evBlocks, ev.BlockID)
	w.lastSeqs[f.aid] = ev.Seq
}

// batch returns the writes of the batch's check-ins, events, records,
// the activities' last seqs and the list's counts: none if every scan was
// refused or replayed.
func (w *checkinWrites) batch(l checkin.List) *pgx.Batch {
	pb := &pgx.Batch{}
	if len(w.seqs) == 0 {
		return pb
	}
	pb.Queue(`INSERT INTO checkin (list_id, seq, registration_id, activity_id, type, at, device, forced, conflict, seats, actor,
			idempotency_key, request_hash)
		SELECT $1, * FROM unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::timestamptz[], $7::text[], $8::bool[],
			$9::text[], $10::int[], $11::text[], $12::text[], $13::bytea[])`,
		l.Seq, w.seqs, w.rids, w.aids, w.types, w.at, w.devices, w.forced, w.conflicts, w.seats, w.actors, w.keys, w.hashes)
	var rids []int64
	var inside []bool
	var insideSeats, entries, exits []int32
	var firstAt []*time.Time
	var firstDevice []*string
	for rid, r := range w.records {
		rids, inside, insideSeats = append(rids, rid), append(inside, r.Inside), append(insideSeats, int32(r.InsideSeats))
		entries, exits = append(entries, int32(r.Entries)), append(exits, int32(r.Exits))
		firstAt, firstDevice = append(firstAt, r.FirstAt), append(firstDevice, nullable(r.FirstDevice))
	}
	pb.Queue(`INSERT INTO checkin_record (list_id, registration_id, inside, inside_seats, entries, exits, first_at, first_device)
		SELECT $1, * FROM unnest($2::bigint[], $3::bool[], $4::int[], $5::int[], $6::int[], $7::timestamptz[], $8::text[])
		ON CONFLICT (list_id, registration_id) DO UPDATE SET inside = excluded.inside, inside_seats = excluded.inside_seats,
			entries = excluded.entries, exits = excluded.exits, first_at = excluded.first_at, first_device = excluded.first_device`,
		l.Seq, rids, inside, insideSeats, entries, exits, firstAt, firstDevice)
	pb.Queue(`UPDATE checkin_list SET checked_in = $2, inside = $3, conflicts = $4, last_seq = $5 WHERE id = $1`,
		l.Seq, l.CheckedIn, l.Inside, l.Conflicts, l.LastSeq)
	pb.Queue(`INSERT INTO registration_event (activity_id, seq, registration_id, user_id, type, from_status, to_status, actor, request_id, at,
			seats, block_id, list_id, device, forced, conflict)
		SELECT e.aid, e.seq, e.reg, e.usr, e.typ, e.st, e.st, e.actor, e.req, e.at, e.seats, e.block, $1, e.device, e.forced, e.conflict
		FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::timestamptz[],
			$11::int[], $12::text[], $13::text[], $14::bool[], $15::text[])
			AS e(aid, seq, reg, usr, typ, st, actor, req, at, seats, block, device, forced, conflict)`,
		l.ID, w.aids, w.evSeqs, w.regIDs, w.evUsers, w.evTypes, w.evStatus, w.actors, w.evReqs, w.at, w.seats, w.evBlocks, w.devices,
		w.forced, w.conflicts)
	var aids, seqs []int64
	for aid, seq := range w.lastSeqs {
		aids, seqs = append(aids, aid), append(seqs, seq)
	}
	pb.Queue(`INSERT INTO activity_state (activity_id, last_seq) SELECT * FROM unnest($1::bigint[], $2::bigint[])
		ON CONFLICT (activity_id) DO UPDATE SET last_seq = excluded.last_seq`, aids, seqs)
	return pb
}

// nullable returns nil for "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// checkinColumns are a check-in's columns, for a query over checkin c
// joined with its registration r and activity a.
const checkinColumns = `c.seq, r.public_id, a.public_id, r.user_id, c.seats, c.type, c.at, c.device, c.forced, c.conflict`

func scanCheckin(l checkin.List) pgx.RowToFunc[checkin.CheckIn] {
	return func(row pgx.CollectableRow) (checkin.CheckIn, error) {
		var ci checkin.CheckIn
		err := row.Scan(checkinDest(&ci)...)
		completeCheckin(&ci, l.ID)
		return ci, err
	}
}

// checkinDest is where a row of checkinColumns is scanned into ci.
func checkinDest(ci *checkin.CheckIn) []any {
	return []any{&ci.Seq, &ci.RegistrationID, &ci.ActivityID, &ci.UserID, &ci.Seats, &ci.Type, &ci.At, &ci.Device, &ci.Forced, &ci.Conflict}
}

// completeCheckin sets what a check-in scanned from checkinColumns does not
// carry: its list, its id, and its time in UTC.
func completeCheckin(ci *checkin.CheckIn, listID string) {
	ci.ListID, ci.ID, ci.At = listID, checkin.CheckInID(listID, ci.Seq), ci.At.UTC()
}

// checkinsOf returns up to limit of the list's check-ins after seq after.
func checkinsOf(ctx context.Context, q querier, l checkin.List, after int64, limit int) ([]checkin.CheckIn, error) {
	rows, err := q.Query(ctx, `SELECT `+checkinColumns+` FROM checkin c JOIN registration r ON r.id = c.registration_id
		JOIN activity a ON a.id = c.activity_id
		WHERE c.list_id = $1 AND c.seq > $2 ORDER BY c.seq LIMIT $3`, l.Seq, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanCheckin(l))
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
