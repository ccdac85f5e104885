package registration

import (
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
	// Line is the head of the waiting line, oldest first: the whole line,
	// or at least LineNeeded registrations of it.
	Line []Registration
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

// errShortLine means the state's line held fewer registrations than the
// decision needed: a bug of the caller, never a client's fault.
var errShortLine = errors.New("registration: the waiting list's head was read too short")

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
		case ConfirmCommand:
			d.confirm(i, c)
		case ReleaseCommand:
			err = d.releaseByRule(i, c)
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
	line     []*Registration // waiting, oldest first, as far as known
	unread   int             // waiting registrations not in line
	tail     []*Registration // waitlisted by this batch, after the unread ones
	// stray are the waiting registrations the commands name that are not
	// in line: promotion under PolicyFill takes them into the line (see
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
	inLine := make(map[string]bool, len(st.Line))
	for _, r := range st.Line {
		if inLine[r.ID] {
			continue // read twice (the head and a party size)
		}
		inLine[r.ID] = true
		if p, ok := d.regs[r.ID]; ok {
			d.line = append(d.line, p)
			continue
		}
		p := &r
		p.Seats = max(p.Seats, 1)
		d.regs[r.ID] = p
		d.line = append(d.line, p)
	}
	sortLine(d.line)
	for id, r := range st.Registrations {
		if r.Status == Waitlisted && !inLine[id] {
			d.stray = append(d.stray, d.regs[id])
		}
	}
	d.unread = max(0, st.Activity.Waiting-len(d.line))
	return d
}

// sortLine puts waiting registrations in join order.
func sortLine(line []*Registration) {
	slices.SortFunc(line, func(a, b *Registration) int { return cmp.Compare(a.WaitlistSeq, b.WaitlistSeq) })
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
