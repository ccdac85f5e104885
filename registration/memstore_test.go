package registration

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/physiciansnet/capacityd"
)

// MemStore is an in-memory Store for unit tests of the Service's own
// rules, without PostgreSQL. It follows the PostgreSQL store's rules
// (package store): Apply reads each activity's ActivityState as the
// store's change transaction does, decides with Decide and writes the
// plans, all or nothing, refusing what the schema refuses; one mutex
// stands for the activities' locks and for the snapshots of the reads.
// Apply is in memapply_test.go, the schema's checks in memschema_test.go,
// the reads in memreads_test.go; faults are injected with FailNext,
// BlockNext and OnApply (memfaults_test.go).
type MemStore struct {
	clock func() time.Time

	mu         sync.Mutex
	activities map[string]*memActivity // by public id
	created    []*memActivity          // in creation order
	regs       map[string]*Registration
	records    map[memRecordKey]memRecord
	// actSeq and regSeq are the last internal ids given out.
	actSeq, regSeq int64

	faults memFaults
}

// memActivity is an activity's row, its activity_state and its
// registrations and events.
type memActivity struct {
	// a carries the settings, Seq and times; its counts are unset.
	a       Activity
	lastSeq int64
	regs    []*Registration // in creation order
	events  []Event         // in seq order
	seqs    map[int64]bool
}

type memRecordKey struct{ activityID, userID, key string }

type memRecord struct {
	o         IdempotentOutcome
	createdAt time.Time
}

// NewMemStore returns an empty MemStore whose clock (the database's now(),
// stamped on activities, change transactions and idempotency records) is
// now, or time.Now when now is nil.
func NewMemStore(now func() time.Time) *MemStore {
	if now == nil {
		now = time.Now
	}
	return &MemStore{
		clock:      now,
		activities: make(map[string]*memActivity),
		regs:       make(map[string]*Registration),
		records:    make(map[memRecordKey]memRecord),
	}
}

// now is the database's clock: UTC, to the microsecond (what PostgreSQL
// keeps).
func (m *MemStore) now() time.Time { return m.clock().UTC().Truncate(time.Microsecond) }

// counts returns the seats of the activity's occupying registrations and
// the number of its waitlisted ones.
func (ma *memActivity) counts() (taken, waiting int) {
	for _, r := range ma.regs {
		switch {
		case r.Status.Occupying():
			taken += max(r.Seats, 1)
		case r.Status == Waitlisted:
			waiting++
		}
	}
	return taken, waiting
}

// activity returns the activity with its authority counts.
func (ma *memActivity) activity() Activity {
	a := ma.a
	a.Taken, a.Waiting = ma.counts()
	a.Remaining = a.SeatRoom().Remaining()
	return a
}

// holder returns the id of the user's active registration, or "".
func (ma *memActivity) holder(userID string) string {
	for _, r := range ma.regs {
		if r.UserID == userID && r.Status.Active() {
			return r.ID
		}
	}
	return ""
}

// waitlisted returns the waiting list, in join order.
func (ma *memActivity) waitlisted() []*Registration {
	var q []*Registration
	for _, r := range ma.regs {
		if r.Status == Waitlisted {
			q = append(q, r)
		}
	}
	slices.SortFunc(q, func(a, b *Registration) int { return cmp.Compare(a.WaitlistSeq, b.WaitlistSeq) })
	return q
}

// position returns a waitlisted registration's place in line: one more
// than those of its activity that joined before it.
func (m *MemStore) position(r *Registration) *int {
	if r.Status != Waitlisted {
		return nil
	}
	p := 1
	for _, w := range m.activities[r.ActivityID].regs {
		if w.Status == Waitlisted && w.WaitlistSeq < r.WaitlistSeq {
			p++
		}
	}
	return &p
}

// memRow returns a copy of a stored registration, sharing nothing with it.
func memRow(r *Registration) Registration {
	c := *r
	c.Metadata = slices.Clone(r.Metadata)
	if r.ExpiresAt != nil {
		t := *r.ExpiresAt
		c.ExpiresAt = &t
	}
	c.WaitlistPosition = nil
	return c
}

// withPosition returns a copy of a stored registration with its place in
// line.
func (m *MemStore) withPosition(r *Registration) Registration {
	c := memRow(r)
	c.WaitlistPosition = m.position(r)
	return c
}

// memEvent returns an event as the store reads it back: without the
// registration Decide attaches.
func memEvent(e Event) Event {
	e.ID = EventID(e.ActivityID, e.Seq)
	e.Registration = nil
	if e.From != nil {
		f := *e.From
		e.From = &f
	}
	return e
}

// CreateActivity stores an activity with public id id.
func (m *MemStore) CreateActivity(ctx context.Context, id string, in NewActivity) (Activity, error) {
	if err := m.faults.enter(ctx, MemCreateActivity, nil); err != nil {
		return Activity{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	at := m.now()
	a := Activity{ID: id, Title: in.Title, Capacity: in.Capacity, HoldSeconds: cmp.Or(in.HoldSeconds, DefaultHoldSeconds),
		Waitlist: in.Waitlist, MaxSeats: cmp.Or(in.MaxSeats, DefaultMaxSeats), Policy: cmp.Or(in.Policy, PolicyStrict),
		CreatedAt: at, UpdatedAt: at}
	if err := memText("activity public_id", id); err != nil {
		return Activity{}, err
	}
	if err := memCheckActivityRow(a); err != nil {
		return Activity{}, err
	}
	if m.activities[id] != nil {
		return Activity{}, memDatabaseError("activity %s exists", id)
	}
	m.actSeq++
	a.Seq = m.actSeq
	ma := &memActivity{a: a, seqs: make(map[int64]bool)}
	m.activities[id] = ma
	m.created = append(m.created, ma)
	return ma.activity(), nil
}

// GetActivity returns the activity with its authority counts.
func (m *MemStore) GetActivity(ctx context.Context, id string) (Activity, error) {
	if err := m.faults.enter(ctx, MemGetActivity, nil); err != nil {
		return Activity{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ma := m.activities[id]
	if ma == nil {
		return Activity{}, ActivityNotFound(id)
	}
	return ma.activity(), nil
}

// ListActivities returns up to limit activities created before the one of
// public id before, newest first.
func (m *MemStore) ListActivities(ctx context.Context, before string, limit int) ([]Activity, error) {
	if err := m.faults.enter(ctx, MemListActivities, nil); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	end := len(m.created)
	if before != "" {
		ma := m.activities[before]
		if ma == nil {
			return nil, UnknownCursor()
		}
		end = int(ma.a.Seq) - 1 // seqs are 1, 2, 3, … in creation order
	}
	var out []Activity
	for i := end - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, m.created[i].activity())
	}
	return out, nil
}

// CheckFull answers each check from one snapshot: the activity's counts
// and setting, and which of the users hold an active registration of it.
func (m *MemStore) CheckFull(ctx context.Context, checks []FullCheck) ([]FullAnswer, error) {
	if err := m.faults.enter(ctx, MemCheckFull, checks); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]FullAnswer, len(checks))
	for i, c := range checks {
		ma := m.activities[c.ActivityID]
		if ma == nil {
			return nil, ActivityNotFound(c.ActivityID)
		}
		a := ma.activity()
		out[i] = FullAnswer{Capacity: a.Capacity, Taken: a.Taken, Waiting: a.Waiting, Waitlist: a.Waitlist,
			Policy: a.Policy, MaxSeats: a.MaxSeats, Holders: make(map[string]string)}
		for _, u := range c.UserIDs {
			if id := ma.holder(u); id != "" {
				out[i].Holders[u] = id
			}
		}
	}
	return out, nil
}

// ClaimDueHolds returns up to limit awaiting_payment registrations due at
// now, oldest deadline first. (No other instance claims here.)
func (m *MemStore) ClaimDueHolds(ctx context.Context, now time.Time, limit int) ([]DueHold, error) {
	if err := m.faults.enter(ctx, MemClaimDueHolds, nil); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var due []*Registration
	for _, ma := range m.created {
		for _, r := range ma.regs {
			if r.Status == AwaitingPayment && r.ExpiresAt != nil && !r.ExpiresAt.After(now) {
				due = append(due, r)
			}
		}
	}
	slices.SortStableFunc(due, func(a, b *Registration) int { return a.ExpiresAt.Compare(*b.ExpiresAt) })
	out := make([]DueHold, 0, min(len(due), limit))
	for _, r := range due[:min(len(due), limit)] {
		out = append(out, DueHold{RegistrationID: r.ID, ActivityID: r.ActivityID})
	}
	return out, nil
}

// ClaimDueReleases finds no due release: the in-memory store keeps no
// schedule (releases are tested on PostgreSQL, internal/test/e2e).
func (m *MemStore) ClaimDueReleases(context.Context, time.Time, int) ([]DueRelease, error) {
	return nil, nil
}

// ReleaseDone does nothing (see ClaimDueReleases).
func (m *MemStore) ReleaseDone(context.Context, string, CancelReason) error { return nil }

// NextDueRelease finds no release moment (see ClaimDueReleases).
func (m *MemStore) NextDueRelease(context.Context, time.Time, time.Time) (time.Time, bool, error) {
	return time.Time{}, false, nil
}

// FindOutcome returns the stored outcome of an idempotency key.
func (m *MemStore) FindOutcome(ctx context.Context, activityID, userID, key string) (IdempotentOutcome, bool, error) {
	if err := m.faults.enter(ctx, MemFindOutcome, nil); err != nil {
		return IdempotentOutcome{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.records[memRecordKey{activityID, userID, key}]
	if !ok {
		return IdempotentOutcome{UserID: userID, Key: key}, false, nil
	}
	o := rec.o
	o.RequestHash, o.Body = slices.Clone(o.RequestHash), slices.Clone(o.Body)
	return o, true, nil
}

// PurgeOutcomes deletes the idempotency records created before t.
func (m *MemStore) PurgeOutcomes(ctx context.Context, before time.Time) (int64, error) {
	if err := m.faults.enter(ctx, MemPurgeOutcomes, nil); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for k, rec := range m.records {
		if rec.createdAt.Before(before) {
			delete(m.records, k)
			n++
		}
	}
	return n, nil
}

var _ Store = (*MemStore)(nil)

// errMemNoPools is the in-memory store's answer to pools, series and
// blocks, which it does not model: their rules are tested on PostgreSQL.
var errMemNoPools = capacityd.Errorf(capacityd.EInternal, "the in-memory store has no pools")

func (m *MemStore) CreatePool(context.Context, string, NewPool) (Pool, error) {
	return Pool{}, errMemNoPools
}
func (m *MemStore) GetPool(context.Context, string) (Pool, error)          { return Pool{}, errMemNoPools }
func (m *MemStore) ListPools(context.Context, string, int) ([]Pool, error) { return nil, errMemNoPools }

func (m *MemStore) CreateSeries(context.Context, string, NewSeries) (Series, error) {
	return Series{}, errMemNoPools
}
func (m *MemStore) GetSeries(context.Context, string) (Series, error) { return Series{}, errMemNoPools }
func (m *MemStore) ListSeries(context.Context, string, int) ([]Series, error) {
	return nil, errMemNoPools
}
func (m *MemStore) UpdateSeries(context.Context, string, SeriesPatch) (Series, error) {
	return Series{}, errMemNoPools
}

func (m *MemStore) ListBlocks(context.Context, string) ([]Block, error) { return nil, errMemNoPools }
func (m *MemStore) GetBlock(context.Context, string) (Block, error)     { return Block{}, errMemNoPools }

// ClaimDueBlocks finds none: the in-memory store has no blocks.
func (m *MemStore) ClaimDueBlocks(context.Context, time.Time, int) ([]DueBlock, error) {
	return nil, nil
}
