package histcheck

import (
	"fmt"
	"time"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// The release check: an activity's promises about the seats the service
// releases by itself, over its event log (gapless, in seq order, check-ins
// among the seat changes), replayed with the service's own transaction
// times, which are what its rules decide by.
//
//   - Only the service releases (actor "system"), only by a rule the
//     activity has ("unconfirmed" with a confirm_by, "no_show" with a
//     release after its start), and only at or after the rule's moment.
//   - Only a registration that held a seat, and then it is cancelled.
//   - "unconfirmed": none confirmed before (a registration.confirmed
//     event, or a seat got at or after confirm_by, which confirms).
//   - "no_show": none with a check-in before (an entry at any list,
//     forced or not): a seat with an accepted entry is never released.
//     (That a released registration enters no more is the door check's:
//     an accepted entry needs a seat.)
//   - The promotions recorded right after a transaction's releases are
//     the service's, in that transaction, of parties in line order. That
//     they are the ones the policy picks is the activity model's (a
//     Release operation, AddReleases).

// ActivityLog is an activity's event log and the moments of its release
// rules (nil: no such rule).
type ActivityLog struct {
	ID string
	// ConfirmBy is its confirm_by; NoShowsAt its starts_at plus its
	// release_no_shows_after_minutes.
	ConfirmBy, NoShowsAt *time.Time
	Events               []LogEvent
}

// LogEvent is one event of an activity's log: the registration's status
// before and after it, its seats, who made it (Actor, and the request it
// answered: "" for the service's own work) and when its transaction
// started, a release's reason, a check-in's list and whether it was
// forced.
type LogEvent struct {
	Seq                  int64
	RegistrationID, Type string
	From, To             string
	Seats                int
	Actor, RequestID     string
	At                   time.Time
	Reason, ListID       string
	Forced               bool
}

// Event types and the actor the release check reads.
const (
	eventCreated    = "registration.created"
	eventPromoted   = "registration.promoted"
	eventReadmitted = "registration.readmitted"
	eventConfirmed  = "registration.confirmed"
	eventReleased   = "registration.released"
	eventCheckedIn  = "registration.checked_in"
	actorSystem     = "system"
)

// ReleaseVerdict is the outcome of the release check.
type ReleaseVerdict struct {
	// Activities with a release rule, release Transactions, registrations
	// Released by each rule, and Promoted right after.
	Activities, Transactions, Unconfirmed, NoShows, Promoted int
	Violations                                               []string
}

// OK reports whether every release kept its promises.
func (v ReleaseVerdict) OK() bool { return len(v.Violations) == 0 }

// String summarises the verdict in one line.
func (v ReleaseVerdict) String() string {
	res := "Ok"
	if !v.OK() {
		res = "Illegal"
	}
	s := fmt.Sprintf("%-9s %-7s %4d activities with a release rule, %d release transactions: %d unconfirmed and %d no-shows released, %d promoted with them",
		"releases", res, v.Activities, v.Transactions, v.Unconfirmed, v.NoShows, v.Promoted)
	if !v.OK() {
		s += fmt.Sprintf("; %d violations, first: %s", len(v.Violations), v.Violations[0])
	}
	return s
}

// releaseReplay is what the log said of each registration so far.
type releaseReplay struct {
	status    map[string]string
	confirmed map[string]bool
	entered   map[string]bool
	// joined numbers the waiting parties in line order.
	joined map[string]int
	joins  int
}

// CheckReleases checks the activities' logs.
func CheckReleases(logs []ActivityLog) ReleaseVerdict {
	var v ReleaseVerdict
	for _, l := range logs {
		if l.ConfirmBy != nil || l.NoShowsAt != nil {
			v.Activities++
		}
		for _, s := range checkReleaseLog(l, &v) {
			v.Violations = append(v.Violations, l.ID+": "+s)
		}
	}
	return v
}

// checkReleaseLog checks one log, counting into v, and returns what it
// broke.
func checkReleaseLog(l ActivityLog, v *ReleaseVerdict) []string {
	var bad []string
	evs := l.Events
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			bad = append(bad, fmt.Sprintf("event %d has seq %d: a gap or a reorder", i+1, e.Seq))
			break
		}
	}
	r := releaseReplay{status: map[string]string{}, confirmed: map[string]bool{}, entered: map[string]bool{}, joined: map[string]int{}}
	for i := 0; i < len(evs); i++ {
		if evs[i].Type != eventReleased {
			r.apply(evs[i], l.ConfirmBy)
			continue
		}
		v.Transactions++
		n, t := releaseAt(evs, i)
		for _, e := range evs[i : i+len(t.released)] {
			bad = append(bad, r.judgeRelease(l, e)...)
			if e.Reason == ReasonUnconfirmed {
				v.Unconfirmed++
			} else {
				v.NoShows++
			}
			r.apply(e, l.ConfirmBy)
		}
		last := 0
		for _, p := range evs[i+len(t.released) : i+n] {
			v.Promoted++
			joined, waiting := r.joined[p.RegistrationID]
			switch {
			case !waiting:
				bad = append(bad, fmt.Sprintf("event %d: %s promoted by a release while not waiting", p.Seq, p.RegistrationID))
			case joined < last:
				bad = append(bad, fmt.Sprintf("event %d: %s promoted by a release after a party that joined the line after it", p.Seq, p.RegistrationID))
			}
			last = max(last, joined)
			r.apply(p, l.ConfirmBy)
		}
		i += n - 1
	}
	return bad
}

// judgeRelease returns what the release e broke, judged before it is
// applied.
func (r *releaseReplay) judgeRelease(l ActivityLog, e LogEvent) []string {
	var bad []string
	f := func(format string, args ...any) {
		bad = append(bad, fmt.Sprintf("event %d: release of %s (%s) ", e.Seq, e.RegistrationID, e.Reason)+fmt.Sprintf(format, args...))
	}
	if e.Actor != actorSystem {
		f("by %s, not the service", e.Actor)
	}
	if was := r.status[e.RegistrationID]; !occupying(was) || e.From != was || e.To != cancelled {
		f("from %s (the log had it %s) to %s: only a seat is released, and cancelled", e.From, was, e.To)
	}
	var due *time.Time
	switch e.Reason {
	case ReasonUnconfirmed:
		due = l.ConfirmBy
		if r.confirmed[e.RegistrationID] {
			f("after it was confirmed")
		}
	case ReasonNoShow:
		due = l.NoShowsAt
		if r.entered[e.RegistrationID] {
			f("after its check-in")
		}
	default:
		f("by no rule the service has")
		return bad
	}
	switch {
	case due == nil:
		f("on an activity without that rule")
	case e.At.Before(*due):
		f("at %s, before its moment %s", e.At.Format(time.RFC3339Nano), due.Format(time.RFC3339Nano))
	}
	return bad
}

// apply replays e.
func (r *releaseReplay) apply(e LogEvent, confirmBy *time.Time) {
	id := e.RegistrationID
	if id == "" {
		return // not a registration's event (a block's)
	}
	switch e.Type {
	case eventConfirmed:
		r.confirmed[id] = true
	case eventCheckedIn:
		r.entered[id] = true
	case eventCreated, eventPromoted, eventReadmitted:
		if occupying(e.To) && confirmBy != nil && !e.At.Before(*confirmBy) {
			r.confirmed[id] = true // a seat got at or after confirm_by confirms
		}
	}
	was := r.status[id]
	if e.To == waitlisted && was != waitlisted {
		r.joins++
		r.joined[id] = r.joins
	} else if was == waitlisted && e.To != waitlisted {
		delete(r.joined, id)
	}
	if e.To != "" {
		r.status[id] = e.To
	}
}

// releaseClockSlack widens a release operation's start: the service's
// transaction times are the database's wall clock, the history's is
// monotonic.
const releaseClockSlack = time.Second

// AddReleases adds to h, as operations of the service (Release), the
// release transactions of the logs: each from its transaction's start
// (at converts the database's times to the history's clock) to window
// later, a bound on its commit.
func AddReleases(h *history.History, logs []ActivityLog, at func(time.Time) int64, window time.Duration) {
	logical, client := 0, 0
	for _, op := range h.Ops {
		logical, client = max(logical, op.Logical), max(client, op.Client)
	}
	for _, l := range logs {
		for _, t := range releaseTransactions(l.Events) {
			start := at(t.at)
			op := releaseOp(l.ID, t.reason, t.seats, t.released, t.promoted, start-int64(releaseClockSlack), start+int64(window))
			logical++
			op.ID, op.Logical, op.Attempt, op.Client = len(h.Ops), logical, 1, client+1
			h.Ops = append(h.Ops, op)
		}
	}
}

// releaseTransaction is one release in a log: what its transaction
// released by reason (seats seats) and promoted right after.
type releaseTransaction struct {
	at                 time.Time
	reason             string
	seats              int
	released, promoted []string
}

// releaseTransactions groups a log's releases by transaction (see
// releaseAt).
func releaseTransactions(evs []LogEvent) []releaseTransaction {
	var out []releaseTransaction
	for i := 0; i < len(evs); i++ {
		if evs[i].Type == eventReleased {
			n, t := releaseAt(evs, i)
			out = append(out, t)
			i += n - 1
		}
	}
	return out
}

// releaseAt returns the release transaction whose first release is
// evs[i], and how many events it spans: the releases of one reason with
// its transaction time in a row, and the promotions that follow them at
// that time as the service's own work (every promotion is the service's;
// another command's in the transaction answers a request).
func releaseAt(evs []LogEvent, i int) (int, releaseTransaction) {
	e := evs[i]
	t := releaseTransaction{at: e.At, reason: e.Reason}
	j := i
	for ; j < len(evs) && evs[j].Type == eventReleased && evs[j].At.Equal(e.At) && evs[j].Reason == e.Reason; j++ {
		t.released = append(t.released, evs[j].RegistrationID)
		t.seats += max(evs[j].Seats, 1)
	}
	for ; j < len(evs) && evs[j].Type == eventPromoted && evs[j].At.Equal(e.At) && evs[j].Actor == actorSystem &&
		evs[j].RequestID == e.RequestID; j++ {
		t.promoted = append(t.promoted, evs[j].RegistrationID)
	}
	return j - i, t
}
