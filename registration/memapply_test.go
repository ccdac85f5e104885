package registration

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/physiciansnet/capacityd"
)

// memWork is one activity's part of a change transaction.
type memWork struct {
	index int
	act   *memActivity
	batch CommandBatch
	state ActivityState
	plan  Plan
}

// Apply runs one change transaction, as the store's does: for each batch
// whose activity exists, it reads the ActivityState (exact counts, the
// registrations the commands name, the holders of the signups' users and
// of the users of registrations that status changes name, the stored
// outcomes of the signups' idempotency keys, the head of the waiting list
// as long as LineNeeded says), decides with Decide, and writes every plan
// or nothing.
func (m *MemStore) Apply(ctx context.Context, batches []CommandBatch, now time.Time) ([]Applied, error) {
	if err := m.faults.enter(ctx, MemApply, batches); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	at := m.now()
	out := make([]Applied, len(batches))
	work := make(map[string]*memWork, len(batches))
	var order []*memWork
	for i, b := range batches {
		ma := m.activities[b.ActivityID]
		if ma == nil {
			out[i].Err = ActivityNotFound(b.ActivityID)
			continue
		}
		w := &memWork{index: i, act: ma, batch: b, state: ActivityState{
			Activity: ma.activity(), LastSeq: ma.lastSeq, At: at,
			Registrations: make(map[string]Registration),
			Holders:       make(map[string]string),
			Outcomes:      make(map[IdempotencyRef]IdempotentOutcome),
		}}
		work[b.ActivityID] = w
		order = append(order, w)
	}
	if len(order) == 0 {
		return out, nil
	}
	// The store takes the activities' locks, and writes, in the order of
	// their internal ids.
	slices.SortFunc(order, func(a, b *memWork) int { return cmp.Compare(a.act.a.Seq, b.act.a.Seq) })
	m.readStates(work, order)
	for _, w := range order {
		p, err := Decide(w.state, w.batch.Commands, now)
		if err != nil {
			// The store's translation of an error that is not the
			// database's.
			return nil, capacityd.Unavailable(fmt.Errorf("activity %s: %w", w.batch.ActivityID, err), "the database is unavailable")
		}
		w.plan = p
	}
	if err := m.write(order, at); err != nil {
		return nil, err
	}
	for _, w := range order {
		out[w.index].Plan = w.plan
	}
	return out, nil
}

// readStates fills the states of the transaction's activities. m.mu is
// held.
func (m *MemStore) readStates(work map[string]*memWork, order []*memWork) {
	for _, w := range order {
		for _, c := range w.batch.Commands {
			var named string
			switch c := c.(type) {
			case SignupCommand:
				if id := w.act.holder(c.UserID); id != "" {
					w.state.Holders[c.UserID] = id
				}
				if c.IdempotencyKey != "" {
					if rec, ok := m.records[memRecordKey{w.batch.ActivityID, c.UserID, c.IdempotencyKey}]; ok {
						o := rec.o
						o.RequestHash, o.Body = slices.Clone(o.RequestHash), slices.Clone(o.Body)
						w.state.Outcomes[IdempotencyRef{UserID: c.UserID, Key: c.IdempotencyKey}] = o
					}
				}
			case CancelCommand:
				named = c.RegistrationID
			case ExpireCommand:
				named = c.RegistrationID
			case SeatsCommand:
				named = c.RegistrationID
			case StatusCommand:
				named = c.RegistrationID
				// A re-admission must know whether its user holds another
				// registration of the activity.
				if r := m.regs[named]; r != nil {
					if rw := work[r.ActivityID]; rw != nil {
						if id := rw.act.holder(r.UserID); id != "" {
							rw.state.Holders[r.UserID] = id
						}
					}
				}
			}
			// A named registration goes to the state of its own activity,
			// when that activity is in the transaction.
			if r := m.regs[named]; r != nil {
				if rw := work[r.ActivityID]; rw != nil {
					rw.state.Registrations[r.ID] = memRow(r)
				}
			}
		}
	}
	// The waiting list as far as the commands may need it, as the store
	// reads it: the head under strict, the first parties of each size
	// under fill.
	for _, w := range order {
		need := LineNeeded(w.state, w.batch.Commands)
		bySize := map[int]int{}
		for k, r := range w.act.waitlisted() {
			seats := max(r.Seats, 1)
			if (need.Strict && k < need.Head()) || (need.Fill && bySize[seats] < need.BySize(seats)) {
				bySize[seats]++
				w.state.Line = append(w.state.Line, memRow(r))
			}
		}
	}
}

// write checks the plans against the schema and writes them, or writes
// nothing. m.mu is held.
func (m *MemStore) write(order []*memWork, at time.Time) error {
	// The rows as the transaction leaves them, checked before anything is
	// written.
	final := make(map[string]Registration)
	var inserted []string
	newSeqs := make(map[string]map[int64]bool)
	newKeys := make(map[memRecordKey]bool)
	for _, w := range order {
		p, aid := w.plan, w.batch.ActivityID
		for _, u := range p.Updates {
			r := m.regs[u.ID]
			if r == nil {
				// The store's update counts its rows.
				return capacityd.Unavailable(fmt.Errorf("change: registration %s not updated", u.ID), "the database is unavailable")
			}
			f := memRow(r)
			if was, ok := final[u.ID]; ok {
				f = was
			}
			f.Status, f.ExpiresAt, f.UpdatedAt = u.Status, u.ExpiresAt, u.UpdatedAt
			final[u.ID] = f
		}
		for _, r := range p.Inserts {
			if _, ok := final[r.ID]; ok || m.regs[r.ID] != nil {
				return memDatabaseError("registration %s exists", r.ID)
			}
			r.ActivityID, r.UpdatedAt, r.WaitlistPosition = aid, r.CreatedAt, nil
			final[r.ID] = r
			inserted = append(inserted, r.ID)
		}
		newSeqs[aid] = make(map[int64]bool)
		for _, e := range p.Events {
			if w.act.seqs[e.Seq] || newSeqs[aid][e.Seq] {
				return memDatabaseError("event %d of activity %s exists", e.Seq, aid)
			}
			newSeqs[aid][e.Seq] = true
			if err := memCheckEventRow(e); err != nil {
				return err
			}
		}
		for _, o := range p.Records {
			k := memRecordKey{aid, o.UserID, o.Key}
			if _, ok := m.records[k]; ok || newKeys[k] {
				return memDatabaseError("idempotency key %q of user %s exists", o.Key, o.UserID)
			}
			newKeys[k] = true
			if err := memCheckRecordRow(o); err != nil {
				return err
			}
		}
		if p.ActivityChanged {
			if err := memCheckActivityRow(p.Activity); err != nil {
				return err
			}
		}
	}
	for _, r := range final {
		if err := memCheckRegistrationRow(r); err != nil {
			return err
		}
	}
	// One active registration per user and activity.
	for _, w := range order {
		active := make(map[string]string)
		check := func(r Registration) error {
			if !r.Status.Active() {
				return nil
			}
			if id, ok := active[r.UserID]; ok {
				return memDatabaseError("user %s holds %s and %s of activity %s", r.UserID, id, r.ID, r.ActivityID)
			}
			active[r.UserID] = r.ID
			return nil
		}
		for _, r := range w.act.regs {
			f, ok := final[r.ID]
			if !ok {
				f = *r
			}
			if err := check(f); err != nil {
				return err
			}
		}
		for _, id := range inserted {
			if r := final[id]; r.ActivityID == w.batch.ActivityID {
				if err := check(r); err != nil {
					return err
				}
			}
		}
	}

	// Commit.
	for id, f := range final {
		if r := m.regs[id]; r != nil {
			f = memRow(&f)
			r.Status, r.ExpiresAt, r.UpdatedAt = f.Status, f.ExpiresAt, f.UpdatedAt
		}
	}
	for _, id := range inserted {
		r := final[id]
		m.regSeq++
		r.Seq = m.regSeq
		stored := memRow(&r)
		m.regs[id] = &stored
		ma := m.activities[r.ActivityID]
		ma.regs = append(ma.regs, &stored)
	}
	for _, w := range order {
		p := w.plan
		for _, e := range p.Events {
			w.act.events = append(w.act.events, memEvent(e))
			w.act.seqs[e.Seq] = true
		}
		w.act.lastSeq = p.LastSeq
		if p.ActivityChanged {
			a := p.Activity
			w.act.a.Title, w.act.a.Capacity, w.act.a.HoldSeconds, w.act.a.Waitlist, w.act.a.UpdatedAt =
				a.Title, a.Capacity, a.HoldSeconds, a.Waitlist, a.UpdatedAt
		}
		for _, o := range p.Records {
			o.RequestHash, o.Body = slices.Clone(o.RequestHash), slices.Clone(o.Body)
			m.records[memRecordKey{w.batch.ActivityID, o.UserID, o.Key}] = memRecord{o: o, createdAt: at}
		}
	}
	return nil
}
