package registration

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ActivityState is what the authority knows about an activity, read under
// its lock at the start of a change transaction.
type ActivityState struct {
	// Activity carries the exact Taken and Waiting counts.
	Activity Activity
	// LastSeq is the seq of the activity's last event.
	LastSeq int64
	// At is the transaction's time, stamped on the rows and events it
	// writes.
	At time.Time
	// Registrations holds the registrations the commands name, by id.
	Registrations map[string]Registration
	// Holders maps the users of the signups, and of the registrations
	// that status changes name, who hold an active registration of the
	// activity to its id. (Cancellations and expiries need none: they
	// only give a place up.)
	Holders map[string]string
	// Outcomes holds the stored outcomes of the commands' idempotency keys.
	Outcomes map[IdempotencyRef]IdempotentOutcome
	// Queue is the head of the waiting list, oldest first: the whole list,
	// or at least QueueNeeded registrations of it.
	Queue []Registration
	// Blocks are the activity's live blocks, oldest first, with their
	// exact Used.
	Blocks []Block
	// Admissions are the admitted queue places of the signups' admission
	// tokens, by token.
	Admissions map[string]AdmittedPlace
}

// Plan is what Decide makes of one activity's commands: the outcomes, the
// rows to write, the events to record and the activity after them.
type Plan struct {
	// Outcomes has one outcome per command, in order.
	Outcomes []Outcome
	// Inserts are the new registrations, Updates the existing ones that
	// changed, each in its final state.
	Inserts []Registration
	Updates []Registration
	// Events are the changes, with seqs following the state's LastSeq.
	Events []Event
	// Activity is the activity after the commands, with exact Taken and
	// Waiting; ActivityChanged says whether its settings changed.
	Activity        Activity
	ActivityChanged bool
	// Records are the first outcomes of idempotency keys, to store.
	Records []IdempotentOutcome
	// LastSeq is the seq of the last event after the commands.
	LastSeq int64
	// Pools are the states of the activity's pools after the transaction
	// (of the pool itself for a pool's batch).
	Pools []PoolSeatState
	// Blocks are the blocks the commands created or changed.
	Blocks []BlockChange
	// UsedTokens are the admission tokens that signups used.
	UsedTokens []string
}

// errShortQueue means the state's queue held fewer registrations than the
// decision needed: a bug of the caller, never a client's fault.
var errShortQueue = errors.New("registration: the waiting list's head was read too short")

// Decide applies the commands of one activity, in order, to its state. It
// is the one copy of the rules of every seat change:
//
//   - a signup for n seats takes n free seats, all or nothing, when the
//     waiting-list policy's promotion would admit it from the end of the
//     line; else it joins the waiting list when the activity keeps one,
//     else it is refused as full (Admit, the one admission rule);
//     a user with an active registration gets already_registered, and an
//     Idempotency-Key's first outcome is replayed;
//   - a cancellation frees the seat (or the place on the list) of a
//     registration its owner or an admin may see; cancelling a cancelled
//     or expired registration changes nothing; giving seats back frees
//     them (a waiting registration may shrink too, and then may fit);
//   - status changes follow pending → awaiting_payment → approved, and a
//     late payment admits an expired registration again only if Admit
//     gives it a seat (a seat is free and nobody waits);
//   - an expiry ends an awaiting_payment hold that is due at now;
//   - a capacity change never evicts anyone;
//   - every seat that a release or a capacity raise frees goes at once to
//     the line, by the activity's policy: under PolicyStrict to the head
//     while it fits; under PolicyFill to every waiting registration that
//     fits, oldest first.
//
// now is the service's clock: hold deadlines and expiry follow it. Decide
// has no side effects; the caller writes the plan in the same transaction.
func Decide(st ActivityState, cmds []Command, now time.Time) (Plan, error) {
	plans, _, err := DecideAll(Change{Activities: []ActivityState{st}, Commands: [][]Command{cmds}}, now)
	if err != nil {
		return Plan{}, err
	}
	return plans[0], nil
}

// run applies the decision's commands in order.
func (d *decision) run(now time.Time) error {
	for i, c := range d.cmds {
		var err error
		switch c := c.(type) {
		case SignupCommand:
			d.signup(i, c)
		case CancelCommand:
			err = d.cancel(i, c)
		case StatusCommand:
			err = d.setStatus(i, c, now)
		case ExpireCommand:
			err = d.expire(i, c, now)
		case SeatsCommand:
			err = d.reduce(i, c)
		case ActivityCommand:
			err = d.patch(i, c)
		case BlockCommand:
			err = d.block(i, c, now)
		case PoolCommand:
			d.outcomes[i] = Outcome{Err: PoolNotFound(c.PoolID)}
		default:
			err = fmt.Errorf("registration: unknown command %T", c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decision is the state of Decide while it goes through the commands.
type decision struct {
	st       ActivityState
	cmds     []Command
	act      Activity
	seq      int64
	regs     map[string]*Registration
	inserted map[string]bool // new registrations
	updated  map[string]bool // existing registrations that changed
	order    []string        // ids of updated registrations, first change first
	holders  map[string]string
	queue    []*Registration // waiting, oldest first, as far as known
	unread   int             // waiting registrations not in queue
	tail     []*Registration // waitlisted by this batch, after the unread ones
	// stray are the waiting registrations the commands name that are not
	// in queue: promotion under PolicyFill takes them into the line (see
	// adoptStray).
	stray    []*Registration
	events   []Event
	outcomes []Outcome
	first    map[IdempotencyRef]int
	changed  bool
	// w is the transaction's world, pools the counts of the activity's
	// pools in it (shared with the other activities of those pools).
	w     *world
	pools []*Pool
	// left are the pools the activity left in this transaction: their
	// activities may take the seats it gave up.
	left []*Pool
	// blocks are the live blocks (oldest first), changedBlocks those the
	// commands created, used or ended, by id.
	blocks        []*Block
	changedBlocks map[string]*BlockChange
	blockOrder    []string
	// tokens are the admission tokens signups used, in order.
	tokens     []string
	usedTokens map[string]bool
}

func newDecision(st ActivityState, cmds []Command) *decision {
	d := &decision{
		st: st, cmds: cmds, act: st.Activity, seq: st.LastSeq,
		regs:     make(map[string]*Registration, len(st.Registrations)+len(cmds)),
		inserted: make(map[string]bool),
		updated:  make(map[string]bool),
		holders:  make(map[string]string, len(st.Holders)),
		outcomes: make([]Outcome, len(cmds)),
		first:    make(map[IdempotencyRef]int),
	}
	// Defaults of rows and activities from before groups existed.
	d.act.MaxSeats = cmp.Or(d.act.MaxSeats, DefaultMaxSeats)
	d.act.Policy = cmp.Or(d.act.Policy, PolicyStrict)
	for id, r := range st.Registrations {
		r.Seats = max(r.Seats, 1)
		d.regs[id] = &r
	}
	for u, id := range st.Holders {
		d.holders[u] = id
	}
	d.changedBlocks = make(map[string]*BlockChange)
	for _, b := range st.Blocks {
		d.blocks = append(d.blocks, &b)
	}
	d.act.Reserved = Reserved(st.Blocks)
	inQueue := make(map[string]bool, len(st.Queue))
	for _, r := range st.Queue {
		if inQueue[r.ID] {
			continue // read twice (the head and a party size)
		}
		inQueue[r.ID] = true
		if p, ok := d.regs[r.ID]; ok {
			d.queue = append(d.queue, p)
			continue
		}
		p := &r
		p.Seats = max(p.Seats, 1)
		d.regs[r.ID] = p
		d.queue = append(d.queue, p)
	}
	sortLine(d.queue)
	for id, r := range st.Registrations {
		if r.Status == Waitlisted && !inQueue[id] {
			d.stray = append(d.stray, d.regs[id])
		}
	}
	d.unread = max(0, st.Activity.Waiting-len(d.queue))
	return d
}

// sortLine puts waiting registrations in join order.
func sortLine(line []*Registration) {
	slices.SortFunc(line, func(a, b *Registration) int { return cmp.Compare(a.WaitlistSeq, b.WaitlistSeq) })
}

// fits reports whether n seats are free now, in the activity and its
// pools.
func (d *decision) fits(n int) bool { return d.counts(0).Fits(n) }

// take counts n more seats taken, in the activity and its pools.
func (d *decision) take(n int) {
	d.act.Taken += n
	for _, p := range d.pools {
		p.Taken += n
	}
}

// remaining is what a new signup could get now.
func (d *decision) remaining() int { return d.counts(0).Remaining() }

// record appends the event of r moving from from (nil: created) to its
// current status, and marks r as changed.
func (d *decision) record(r *Registration, typ EventType, from *Status, o Origin) {
	d.seq++
	r.UpdatedAt = d.st.At
	if typ == EventWaitlisted {
		r.WaitlistSeq = d.seq
		r.Joined = d.w.join()
	}
	snapshot := *r
	d.events = append(d.events, Event{
		ID: EventID(d.act.ID, d.seq), Seq: d.seq, ActivityID: d.act.ID, RegistrationID: r.ID, UserID: r.UserID,
		Type: typ, From: from, To: r.Status, Seats: r.Seats, Actor: o.Actor, RequestID: o.RequestID, At: d.st.At,
		BlockID: r.BlockID, Registration: &snapshot,
	})
	if !d.inserted[r.ID] && !d.updated[r.ID] {
		d.updated[r.ID] = true
		d.order = append(d.order, r.ID)
	}
}

// move changes r's status and records the event.
func (d *decision) move(r *Registration, to Status, typ EventType, o Origin) {
	from := r.Status
	r.Status = to
	if to != AwaitingPayment {
		r.ExpiresAt = nil
	}
	d.record(r, typ, &from, o)
}

func (d *decision) signup(i int, c SignupCommand) {
	if c.IdempotencyKey != "" {
		ref := IdempotencyRef{c.UserID, c.IdempotencyKey}
		if o, ok := d.st.Outcomes[ref]; ok {
			d.outcomes[i] = o.Replay(c.RequestHash)
			return
		}
		if j, ok := d.first[ref]; ok {
			first := d.outcomes[j]
			if !bytes.Equal(d.cmds[j].(SignupCommand).RequestHash, c.RequestHash) {
				d.outcomes[i] = Outcome{Err: idempotencyConflict(c.IdempotencyKey)}
				return
			}
			first.Replayed, first.Changed = true, false
			d.outcomes[i] = first
			return
		}
	}
	// A signup refused for its window or its admission is not an
	// Idempotency-Key's first outcome: the same request may succeed once
	// the activity opens or the user is admitted.
	if err := d.admitted(c); err != nil {
		d.outcomes[i] = Outcome{Err: err}
		return
	}
	if c.IdempotencyKey != "" {
		d.first[IdempotencyRef{c.UserID, c.IdempotencyKey}] = i
	}
	if id := d.holders[c.UserID]; id != "" {
		d.outcomes[i] = Outcome{Err: AlreadyRegistered(d.act.ID, id)}
		return
	}
	n := max(c.Seats, 1)
	if n > d.act.MaxSeats {
		d.outcomes[i] = Outcome{Err: TooManySeats(d.act, n)}
		return
	}
	if refusal, err := d.overLimit(c.UserID); err != nil || refusal != nil {
		d.outcomes[i] = Outcome{Err: cmp.Or(err, refusal)}
		return
	}
	b, err := d.blockFor(c, n)
	if err != nil {
		d.outcomes[i] = Outcome{Err: err}
		return
	}
	r := &Registration{
		ID: c.RegistrationID, ActivityID: d.act.ID, UserID: c.UserID, Seats: n, Metadata: c.Metadata,
		CreatedAt: d.st.At,
	}
	admission := AdmitSeat
	if b != nil {
		id := b.ID
		r.BlockID = &id
		d.useBlock(b, n)
	} else {
		admission = Admit(d.counts(n))
	}
	if admission != AdmitFull {
		d.useToken(c)
	}
	switch admission {
	case AdmitSeat:
		r.Status = Pending
		d.take(n)
		d.inserted[r.ID] = true
		d.record(r, EventCreated, nil, c.Origin)
	case AdmitWaitlist:
		r.Status = Waitlisted
		d.inserted[r.ID] = true
		// The join order is the order of the waitlisted events: record
		// sets WaitlistSeq to the event's seq.
		d.record(r, EventWaitlisted, nil, c.Origin)
		d.tail = append(d.tail, r)
		d.act.Waiting++
		pos := d.act.Waiting
		snapshot := *r
		snapshot.WaitlistPosition = &pos
		// The event's registration is as the change left it: in line at pos.
		d.events[len(d.events)-1].Registration.WaitlistPosition = &pos
		d.regs[r.ID] = r
		d.holders[c.UserID] = r.ID
		d.holdInSeries(r, true)
		d.outcomes[i] = Outcome{Registration: &snapshot, Changed: true}
		return
	default:
		d.outcomes[i] = Outcome{Err: ActivityFull(d.act.ID, d.counts(n))}
		return
	}
	d.regs[r.ID] = r
	d.holders[c.UserID] = r.ID
	d.holdInSeries(r, true)
	d.outcomes[i] = d.changedOutcome(r)
}

func (d *decision) waiting() int { return d.act.Waiting }

// counts returns the activity's counts as they stand, for Admit of a
// signup for seats.
func (d *decision) counts(seats int) Counts {
	return NewCounts(d.act.SeatRoom(), d.act.Waiting, d.act.Waitlist, d.act.Policy, d.pools).For(seats)
}

func (d *decision) changedOutcome(r *Registration) Outcome {
	snapshot := *r
	return Outcome{Registration: &snapshot, Changed: true}
}

func (d *decision) unchangedOutcome(r *Registration) Outcome {
	snapshot := *r
	return Outcome{Registration: &snapshot}
}

// named returns the registration a command names, or not_found.
func (d *decision) named(id string) (*Registration, error) {
	r, ok := d.regs[id]
	if !ok {
		return nil, RegistrationNotFound(id)
	}
	return r, nil
}

func (d *decision) cancel(i int, c CancelCommand) error {
	r, err := d.named(c.RegistrationID)
	if err != nil || (!c.Caller.Admin && r.UserID != c.Caller.UserID) {
		d.outcomes[i] = Outcome{Err: RegistrationNotFound(c.RegistrationID)}
		return nil
	}
	switch {
	case r.Status.Occupying():
		d.move(r, Cancelled, EventCancelled, c.Origin)
		d.release(r, r.Seats)
		delete(d.holders, r.UserID)
		d.holdInSeries(r, false)
		d.outcomes[i] = d.changedOutcome(r)
		return d.promote(c.Origin)
	case r.Status == Waitlisted:
		d.leaveQueue(r)
		d.move(r, Cancelled, EventCancelled, c.Origin)
		delete(d.holders, r.UserID)
		d.holdInSeries(r, false)
		d.outcomes[i] = d.changedOutcome(r)
		// Under PolicyStrict the new head may fit.
		return d.promote(c.Origin)
	default:
		d.outcomes[i] = d.unchangedOutcome(r)
	}
	return nil
}

// leaveQueue takes a waitlisted registration off the list.
func (d *decision) leaveQueue(r *Registration) {
	d.act.Waiting--
	if removeReg(&d.queue, r) || removeReg(&d.tail, r) {
		return
	}
	// Behind the known head: one fewer unread.
	d.unread--
}

func removeReg(list *[]*Registration, r *Registration) bool {
	for k, q := range *list {
		if q == r {
			*list = append((*list)[:k:k], (*list)[k+1:]...)
			return true
		}
	}
	return false
}

func (d *decision) setStatus(i int, c StatusCommand, now time.Time) error {
	r, err := d.named(c.RegistrationID)
	if err != nil {
		d.outcomes[i] = Outcome{Err: err}
		return nil
	}
	switch {
	case c.To == AwaitingPayment && r.Status == Pending:
		// PostgreSQL keeps microseconds: the answer must equal what is
		// read back later.
		until := now.Add(time.Duration(d.act.HoldSeconds) * time.Second).UTC().Truncate(time.Microsecond)
		r.ExpiresAt = &until
		d.move(r, AwaitingPayment, EventStatusChanged, c.Origin)
	case c.To == Approved && (r.Status == Pending || r.Status == AwaitingPayment):
		d.move(r, Approved, EventStatusChanged, c.Origin)
	case c.To == Approved && r.Status == Expired:
		if id := d.holders[r.UserID]; id != "" {
			d.outcomes[i] = Outcome{Err: AlreadyRegistered(d.act.ID, id)}
			return nil
		}
		if refusal, err := d.overLimit(r.UserID); err != nil || refusal != nil {
			d.outcomes[i] = Outcome{Err: cmp.Or(err, refusal)}
			return nil
		}
		// A re-admission takes its seats or nothing: it never joins the
		// line.
		if c := d.counts(r.Seats); Admit(c) != AdmitSeat {
			d.outcomes[i] = Outcome{Err: ActivityFull(d.act.ID, c)}
			return nil
		}
		// It takes public seats: a block it once used keeps its own.
		r.BlockID = nil
		d.move(r, Approved, EventReadmitted, c.Origin)
		d.take(r.Seats)
		d.holders[r.UserID] = r.ID
		d.holdInSeries(r, true)
	default:
		d.outcomes[i] = Outcome{Err: InvalidTransition(*r, c.To)}
		return nil
	}
	d.outcomes[i] = d.changedOutcome(r)
	return nil
}

func (d *decision) expire(i int, c ExpireCommand, now time.Time) error {
	r, err := d.named(c.RegistrationID)
	if err != nil {
		d.outcomes[i] = Outcome{Err: err}
		return nil
	}
	if r.Status != AwaitingPayment || r.ExpiresAt == nil || r.ExpiresAt.After(now) {
		d.outcomes[i] = d.unchangedOutcome(r)
		return nil
	}
	d.move(r, Expired, EventExpired, c.Origin)
	d.release(r, r.Seats)
	delete(d.holders, r.UserID)
	d.holdInSeries(r, false)
	d.outcomes[i] = d.changedOutcome(r)
	return d.promote(c.Origin)
}

func (d *decision) patch(i int, c ActivityCommand) error {
	p := c.Patch
	if err := d.patchOnSale(p); err != nil {
		d.outcomes[i] = Outcome{Err: err}
		return nil
	}
	if p.SeriesID != nil && *p.SeriesID != "" {
		if _, ok := d.w.series[*p.SeriesID]; !ok {
			d.outcomes[i] = Outcome{Err: UnknownSeries(*p.SeriesID)}
			return nil
		}
	}
	if p.Pools != nil {
		if missing := d.w.unknownPools(*p.Pools); len(missing) > 0 {
			d.outcomes[i] = Outcome{Err: UnknownPools(missing)}
			return nil
		}
		if err := d.overfullJoin(*p.Pools); err != nil {
			d.outcomes[i] = Outcome{Err: err}
			return nil
		}
		d.left = append(d.left, d.repool(*p.Pools)...)
	}
	if p.Title != nil {
		d.act.Title = *p.Title
	}
	if p.SeriesID != nil {
		d.act.SeriesID = nil
		if *p.SeriesID != "" {
			id := *p.SeriesID
			d.act.SeriesID = &id
		}
	}
	if p.HoldSeconds != nil {
		d.act.HoldSeconds = *p.HoldSeconds
	}
	if p.Waitlist != nil {
		d.act.Waitlist = *p.Waitlist
	}
	if p.Capacity != nil {
		d.act.Capacity = *p.Capacity
	}
	if p.MaxSeats != nil {
		d.act.MaxSeats = *p.MaxSeats
	}
	if p.Policy != nil {
		d.act.Policy = *p.Policy
	}
	d.act.UpdatedAt = settingsChangedAt(d.act.UpdatedAt, d.st.At)
	d.changed = true
	if err := d.promote(c.Origin); err != nil {
		return err
	}
	a := d.activity()
	d.outcomes[i] = Outcome{Activity: &a, Changed: true}
	return nil
}

// settingsChangedAt returns the updated_at of an activity whose settings
// change at now: now to the microsecond (what PostgreSQL keeps), but
// always after the last one, so that an activity's updated_at orders the
// changes of its settings (the display tier applies them in that order,
// whichever instance's commit reaches it first) even when a transaction's
// clock reads earlier than the one before it.
func settingsChangedAt(last, now time.Time) time.Time {
	now = now.Truncate(time.Microsecond)
	if !now.After(last) {
		return last.Truncate(time.Microsecond).Add(time.Microsecond)
	}
	return now
}

// activity returns the activity as it stands, with its derived numbers.
func (d *decision) activity() Activity {
	a := d.act
	a.Remaining = d.remaining()
	a.Reserved = d.act.Reserved
	if a.Pools == nil {
		a.Pools = []string{}
	}
	return a
}

func (d *decision) plan() (Plan, error) {
	p := Plan{Outcomes: d.outcomes, Events: d.events, Activity: d.activity(), ActivityChanged: d.changed, LastSeq: d.seq,
		UsedTokens: d.tokens}
	for _, id := range d.blockOrder {
		p.Blocks = append(p.Blocks, *d.changedBlocks[id])
	}
	for _, e := range d.events {
		if e.Type == EventCreated || e.Type == EventWaitlisted {
			r := *d.regs[e.RegistrationID]
			r.WaitlistPosition = nil
			p.Inserts = append(p.Inserts, r)
		}
	}
	for _, id := range d.order {
		r := *d.regs[id]
		r.WaitlistPosition = nil
		p.Updates = append(p.Updates, r)
	}
	for i, c := range d.cmds {
		s, ok := c.(SignupCommand)
		if !ok || s.IdempotencyKey == "" {
			continue
		}
		if j, ok := d.first[IdempotencyRef{s.UserID, s.IdempotencyKey}]; !ok || j != i {
			continue
		}
		o, err := outcomeOf(s, d.outcomes[i])
		if err != nil {
			return Plan{}, err
		}
		p.Records = append(p.Records, o)
	}
	return p, nil
}
