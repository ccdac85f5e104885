package store

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
)

// RedeemBatch decides and records the scans of one list, in order, in one
// transaction (the scans of many devices gathered while the list's last
// transaction ran):
//
//	lock the list's row (every scan of the list, on any instance, waits here)
//	generic plans from here on (genericPlans); the recorded check-ins of the
//	  batch's Idempotency-Keys; the scanned registrations                               -- one round trip
//	pg_advisory_xact_lock of their activities, in id order (the lock of every seat change);
//	  the registrations, their records on the list, the activities' last seqs            -- one more
//	checkin.Decide, scan after scan
//	INSERT the check-ins and their events; UPDATE the records (a registration's
//	  checked_in is read from them), the list's counts, the activities' last seqs; COMMIT  -- one more
//
// The list's lock comes before the activities': no transaction takes a
// list's lock while it holds an activity's, so the two orders never
// deadlock. A refused scan writes nothing and is answered alone; an error
// of the transaction fails the whole batch.
func (s *Store) RedeemBatch(ctx context.Context, listID string, ins []checkin.Redemption, now time.Time) ([]checkin.RedeemOutcome, error) {
	var out []checkin.RedeemOutcome
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = make([]checkin.RedeemOutcome, len(ins))
		b := &redeemBatch{tx: tx, ins: ins, out: out, now: now}
		return b.run(ctx, listID)
	})
	return out, err
}

// redeemBatch is the state of one RedeemBatch transaction.
type redeemBatch struct {
	tx  pgx.Tx
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
	seq  int64
	hash []byte
}

// scanned is a registration a scan names, as found before the locks.
type scanned struct {
	rid, aid int64
	act      string
}

func (b *redeemBatch) run(ctx context.Context, listID string) error {
	l, err := lockList(ctx, b.tx, listID)
	if err != nil {
		return err
	}
	b.list = l
	if err := b.readKeysAndRegistrations(ctx); err != nil {
		return err
	}
	if err := b.lockAndRead(ctx); err != nil {
		return err
	}
	firstOfKey := map[string]int{}
	for i, in := range b.ins {
		b.decide(i, in, firstOfKey)
	}
	if err := b.writes.send(ctx, b.tx, b.list); err != nil {
		return err
	}
	return b.fillReplays(ctx)
}

// readKeysAndRegistrations reads the recorded check-ins of the batch's
// keys and finds the scanned registrations.
func (b *redeemBatch) readKeysAndRegistrations(ctx context.Context) error {
	var keys, ids []string
	for _, in := range b.ins {
		if in.IdempotencyKey != "" {
			keys = append(keys, in.IdempotencyKey)
		}
		ids = append(ids, in.RegistrationID)
	}
	b.replays, b.found = map[string]recorded{}, map[string]scanned{}
	pb := &pgx.Batch{}
	// The rest of the transaction runs with generic plans (genericPlans):
	// its statements over lists of ids were planned again at every
	// execution, planning costing about as much as running them.
	pb.Queue(genericPlans)
	if len(keys) > 0 {
		pb.Queue(`SELECT idempotency_key, seq, request_hash FROM checkin WHERE list_id = $1 AND idempotency_key = ANY ($2)`,
			b.list.Seq, keys).Query(func(rows pgx.Rows) error {
			var key string
			var r recorded
			_, err := pgx.ForEachRow(rows, []any{&key, &r.seq, &r.hash}, func() error {
				b.replays[key] = r
				return nil
			})
			return err
		})
	}
	pb.Queue(`SELECT r.public_id, r.id, r.activity_id, a.public_id FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE r.public_id = ANY ($1)`, ids).Query(func(rows pgx.Rows) error {
		var id string
		var f scanned
		_, err := pgx.ForEachRow(rows, []any{&id, &f.rid, &f.aid, &f.act}, func() error {
			b.found[id] = f
			return nil
		})
		return err
	})
	return b.tx.SendBatch(ctx, pb).Close()
}

// lockAndRead takes the locks of the scanned registrations' activities,
// in id order, and reads the registrations, their records on the list and
// the activities' last seqs under them.
func (b *redeemBatch) lockAndRead(ctx context.Context) error {
	var aids, rids []int64
	for _, f := range b.found {
		if !slices.Contains(aids, f.aid) {
			aids = append(aids, f.aid)
		}
		rids = append(rids, f.rid)
	}
	slices.Sort(aids)
	b.regs, b.records, b.seqs = map[int64]*registration.Registration{}, map[int64]checkin.Record{}, map[int64]int64{}
	if len(aids) == 0 {
		return nil
	}
	pb := &pgx.Batch{}
	pb.Queue(`SELECT count(pg_advisory_xact_lock($1, k.id)) FROM unnest($2::int[]) AS k(id)`,
		int32(admissionLockNamespace), aids)
	pb.Queue(`SELECT `+registrationColumns+` FROM registration r JOIN activity a ON a.id = r.activity_id WHERE r.id = ANY ($1)`,
		rids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			reg, err := scanRegistration(rows)
			if err != nil {
				return err
			}
			b.regs[reg.Seq] = &reg
		}
		return rows.Err()
	})
	pb.Queue(`SELECT registration_id, inside, inside_seats, entries, exits, first_at, coalesce(first_device, '') FROM checkin_record
		WHERE list_id = $1 AND registration_id = ANY ($2)`, b.list.Seq, rids).Query(func(rows pgx.Rows) error {
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
	// 0, the map's zero. (Read by its key: a join with the ids' unnest
	// would have a generic plan that reads the table whole.)
	pb.Queue(`SELECT s.activity_id, s.last_seq FROM activity_state s WHERE s.activity_id = ANY ($1)`,
		aids).Query(func(rows pgx.Rows) error {
		var aid, seq int64
		_, err := pgx.ForEachRow(rows, []any{&aid, &seq}, func() error {
			b.seqs[aid] = seq
			return nil
		})
		return err
	})
	return b.tx.SendBatch(ctx, pb).Close()
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
			b.out[i] = replayOf(r.hash, r.seq, in)
			return
		}
		if j, ok := firstOfKey[k]; ok {
			b.out[i] = replayOf(b.ins[j].RequestHash, b.out[j].CheckIn.Seq, in)
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

// replayOf answers a scan whose key recorded check-in seq (filled in by
// fillReplays), or refuses a key reused for another scan.
func replayOf(hash []byte, seq int64, in checkin.Redemption) checkin.RedeemOutcome {
	if !bytes.Equal(hash, in.RequestHash) {
		return checkin.RedeemOutcome{Err: capacityd.Errorf(capacityd.EIdempotencyConflict,
			"Idempotency-Key %q was used with a different scan on this list", in.IdempotencyKey)}
	}
	return checkin.RedeemOutcome{Redeemed: checkin.Redeemed{Replayed: true, CheckIn: checkin.CheckIn{Seq: seq}}}
}

// fillReplays reads the check-ins replayed answers name, with their
// registrations as they are now, and sets every answer's list.
func (b *redeemBatch) fillReplays(ctx context.Context) error {
	var seqs []int64
	for i := range b.out {
		b.out[i].List = b.list
		if b.out[i].Replayed {
			seqs = append(seqs, b.out[i].CheckIn.Seq)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	cis, err := checkinsAt(ctx, b.tx, b.list, seqs)
	if err != nil {
		return err
	}
	var ids []string
	for _, ci := range cis {
		ids = append(ids, ci.RegistrationID)
	}
	rows, err := b.tx.Query(ctx, `SELECT `+registrationColumns+` FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE r.public_id = ANY ($1)`, ids)
	if err != nil {
		return err
	}
	regs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.Registration, error) { return scanRegistration(row) })
	if err != nil {
		return err
	}
	for i := range b.out {
		o := &b.out[i]
		if !o.Replayed {
			continue
		}
		ci, ok := cis[o.CheckIn.Seq]
		if !ok {
			return errors.New("store: a recorded check-in is missing")
		}
		o.CheckIn, o.Result = ci, checkin.ResultEntered
		if ci.Type == checkin.TypeExit {
			o.Result = checkin.ResultExited
		}
		for _, r := range regs {
			if r.ID == ci.RegistrationID {
				o.Registration = r
			}
		}
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

// send writes the batch's check-ins, events, records, the activities'
// last seqs and the list's counts.
func (w *checkinWrites) send(ctx context.Context, tx pgx.Tx, l checkin.List) error {
	if len(w.seqs) == 0 {
		return nil
	}
	pb := &pgx.Batch{}
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
	return tx.SendBatch(ctx, pb).Close()
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
		ci := checkin.CheckIn{ListID: l.ID}
		err := row.Scan(&ci.Seq, &ci.RegistrationID, &ci.ActivityID, &ci.UserID, &ci.Seats, &ci.Type, &ci.At, &ci.Device, &ci.Forced, &ci.Conflict)
		ci.ID, ci.At = checkin.CheckInID(l.ID, ci.Seq), ci.At.UTC()
		return ci, err
	}
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

// checkinsAt returns the list's check-ins of the given seqs, by seq.
func checkinsAt(ctx context.Context, q querier, l checkin.List, seqs []int64) (map[int64]checkin.CheckIn, error) {
	rows, err := q.Query(ctx, `SELECT `+checkinColumns+` FROM checkin c JOIN registration r ON r.id = c.registration_id
		JOIN activity a ON a.id = c.activity_id WHERE c.list_id = $1 AND c.seq = ANY ($2)`, l.Seq, seqs)
	if err != nil {
		return nil, err
	}
	cis, err := pgx.CollectRows(rows, scanCheckin(l))
	out := make(map[int64]checkin.CheckIn, len(cis))
	for _, ci := range cis {
		out[ci.Seq] = ci
	}
	return out, err
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
