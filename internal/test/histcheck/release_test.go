package histcheck

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// release adds the service's release of released by reason, promoting
// promoted, from call to ret.
func (b *builder) release(reason string, released, promoted []string, call, ret int64) *builder {
	op := releaseOp(act, reason, len(released), released, promoted, call, ret)
	op.ID, op.Logical = len(b.h.Ops), len(b.h.Ops)+1
	b.h.Ops = append(b.h.Ops, op)
	return b
}

func confirmOf(u int, id string) history.Input {
	return history.Input{Key: act, User: u, Registration: id}
}

func confirmed(id string) history.Output {
	return history.Output{Status: 200, Registration: id, RegStatus: pending, Seats: 1}
}

// twoSeatedOneWaiting is an activity of two seats, r0 and r1 seated, r2
// and r3 waiting in that order.
func twoSeatedOneWaiting() *builder {
	b := created(&builder{}, 2, true)
	b.add(history.Signup, signup(0), 10, 20, history.Answered, admitted("r0"))
	b.add(history.Signup, signup(1), 30, 40, history.Answered, admitted("r1"))
	b.add(history.Signup, signup(2), 50, 60, history.Answered, history.Output{Status: 202, Registration: "r2", RegStatus: waitlisted, Seats: 1, Position: 1})
	b.add(history.Signup, signup(3), 61, 62, history.Answered, history.Output{Status: 202, Registration: "r3", RegStatus: waitlisted, Seats: 1, Position: 2})
	return b
}

func TestReleasesAndConfirmationsAreLinearizable(t *testing.T) {
	b := twoSeatedOneWaiting()
	b.add(Confirm, confirmOf(0, "r0"), 70, 80, history.Answered, confirmed("r0"))
	b.add(Confirm, confirmOf(2, "r2"), 81, 82, history.Answered, history.Output{Status: 409, Code: "invalid_transition"})
	// The service releases the unconfirmed r1 and promotes r2, the first
	// in line, in the same transaction.
	b.release(ReasonUnconfirmed, []string{"r1"}, []string{"r2"}, 85, 200)
	b.add(history.ReadActivity, history.Input{Key: act}, 210, 220, history.Answered, read(2, 1, 2, true))
	// A confirmed one is answered unchanged; the released one is closed.
	b.add(Confirm, confirmOf(0, "r0"), 230, 240, history.Answered, confirmed("r0"))
	b.add(Confirm, confirmOf(1, "r1"), 241, 242, history.Answered, history.Output{Status: 409, Code: "confirmation_closed"})
	b.add(history.Cancel, history.Input{Key: act, User: 1, Registration: "r1"}, 243, 244, history.Answered,
		history.Output{Status: 200, Registration: "r1", RegStatus: cancelled, Seats: 1})
	// r2, seated by the release, may be refused too: the model cannot
	// tell a seat got after confirm_by (the release check judges it).
	b.add(Confirm, confirmOf(2, "r2"), 250, 260, history.Answered, history.Output{Status: 409, Code: "confirmation_closed"})
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
}

// TestReleasesThatBreakTheModelAreCaught breaks each promise the model
// holds a release to and requires the authority's verdict to be Illegal.
func TestReleasesThatBreakTheModelAreCaught(t *testing.T) {
	for name, tc := range map[string]func(b *builder){
		"a confirmed registration released as unconfirmed": func(b *builder) {
			b.add(Confirm, confirmOf(1, "r1"), 70, 80, history.Answered, confirmed("r1"))
			b.release(ReasonUnconfirmed, []string{"r1"}, []string{"r2"}, 85, 200)
		},
		"a waiting registration released": func(b *builder) {
			b.release(ReasonNoShow, []string{"r3"}, nil, 85, 200)
		},
		"the freed seat not given to the line": func(b *builder) {
			b.release(ReasonNoShow, []string{"r1"}, nil, 85, 200)
		},
		"the second in line promoted": func(b *builder) {
			b.release(ReasonNoShow, []string{"r1"}, []string{"r3"}, 85, 200)
		},
		"a registration released twice": func(b *builder) {
			b.release(ReasonNoShow, []string{"r1"}, []string{"r2"}, 85, 90)
			b.release(ReasonNoShow, []string{"r1"}, []string{"r3"}, 95, 100)
		},
		"a registration released by no rule": func(b *builder) {
			b.release("late", []string{"r1"}, []string{"r2"}, 85, 200)
		},
		"a read that misses the release": func(b *builder) {
			b.release(ReasonNoShow, []string{"r0", "r1"}, []string{"r2", "r3"}, 85, 90)
			b.add(history.ReadActivity, history.Input{Key: act}, 100, 110, history.Answered, read(2, 2, 2, true))
		},
		"a confirmation refused after it was answered": func(b *builder) {
			b.add(Confirm, confirmOf(0, "r0"), 70, 80, history.Answered, confirmed("r0"))
			b.add(Confirm, confirmOf(0, "r0"), 90, 100, history.Answered, history.Output{Status: 409, Code: "confirmation_closed"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := twoSeatedOneWaiting()
			tc(b)
			r := Check(b.h, opts)
			require.Equal(t, porcupine.Illegal, r.Authority.Result, "%s", r)
			t.Log(r.Authority.Witness(act))
		})
	}
}

// TestAReleaseInFlightMayBeSeenOrNot: a read during the release's window
// may show it done or not, and an unanswered confirmation may or may not
// have saved its registration.
func TestAReleaseInFlightMayBeSeenOrNot(t *testing.T) {
	for _, taken := range []int{1, 2} {
		b := twoSeatedOneWaiting()
		b.add(Confirm, confirmOf(0, "r0"), 63, 64, history.Unknown, history.Output{Error: "timeout"})
		b.release(ReasonUnconfirmed, []string{"r1"}, nil, 70, 200)
		b.add(history.Cancel, history.Input{Key: act, User: 2, Registration: "r2"}, 65, 66, history.Answered,
			history.Output{Status: 200, Registration: "r2", RegStatus: cancelled, Seats: 1})
		b.add(history.Cancel, history.Input{Key: act, User: 3, Registration: "r3"}, 67, 68, history.Answered,
			history.Output{Status: 200, Registration: "r3", RegStatus: cancelled, Seats: 1})
		b.add(history.ReadActivity, history.Input{Key: act}, 100, 110, history.Answered, read(taken, 0, 2, true))
		r := Check(b.h, opts)
		require.True(t, r.OK(), "taken %d: %s", taken, r)
	}
}

func TestAddReleasesReadsTheTransactionsOfALog(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	log := releaseFixture(t0)
	var h history.History
	h.Ops = append(h.Ops, history.Op{ID: 0, Logical: 7, Client: 3})
	AddReleases(&h, []ActivityLog{log}, func(at time.Time) int64 { return int64(at.Sub(t0)) }, 10*time.Second)
	require.Len(t, h.Ops, 2)
	op := h.Ops[1]
	assert.Equal(t, Release, op.Kind)
	assert.Equal(t, 8, op.Logical)
	assert.Equal(t, 4, op.Client, "a client of its own")
	assert.Equal(t, ReasonUnconfirmed, op.Input.To)
	assert.Equal(t, 1, op.Input.Held, "the seats it freed")
	released, promoted := ReleaseOf(op.Output)
	assert.Equal(t, []string{"r1"}, released)
	assert.Equal(t, []string{"r2"}, promoted, "the cancellation's promotion answered a request: not the release's")
	assert.Equal(t, int64(5*time.Second-releaseClockSlack), op.Call)
	assert.Equal(t, int64(15*time.Second), op.Return)
}

// releaseFixture is the log of an activity whose confirm_by is t0+5s: r0
// and r1 seated, r0 confirmed and checked in, r2 and r3 waiting; at
// confirm_by the unconfirmed r1 is released and r2 promoted; then r0
// cancels and r3 takes the seat.
func releaseFixture(t0 time.Time) ActivityLog {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	by := at(5)
	ev := func(seq int64, id, typ, from, to string, s int) LogEvent {
		return LogEvent{Seq: seq, RegistrationID: id, Type: typ, From: from, To: to, Seats: 1, Actor: "user:u", RequestID: "q", At: at(s)}
	}
	evs := []LogEvent{
		ev(1, "r0", eventCreated, "", pending, 1),
		ev(2, "r1", eventCreated, "", pending, 1),
		ev(3, "r2", "registration.waitlisted", "", waitlisted, 2),
		ev(4, "r3", "registration.waitlisted", "", waitlisted, 2),
		ev(5, "r0", eventConfirmed, pending, pending, 3),
		{Seq: 6, RegistrationID: "r0", Type: eventCheckedIn, From: pending, To: pending, Actor: "admin:door", RequestID: "d", At: at(4), ListID: "cl_1"},
		{Seq: 7, RegistrationID: "r1", Type: eventReleased, From: pending, To: cancelled, Seats: 1, Actor: actorSystem, At: at(5), Reason: ReasonUnconfirmed},
		{Seq: 8, RegistrationID: "r2", Type: eventPromoted, From: waitlisted, To: pending, Seats: 1, Actor: actorSystem, At: at(5)},
		// Another command of the same transaction: its promotion answers
		// its request.
		ev(9, "r0", "registration.cancelled", pending, cancelled, 5),
		{Seq: 10, RegistrationID: "r3", Type: eventPromoted, From: waitlisted, To: pending, Seats: 1, Actor: actorSystem, RequestID: "q", At: at(5)},
	}
	return ActivityLog{ID: act, ConfirmBy: &by, Events: evs}
}

func TestReleaseCheckPassesAnExactLog(t *testing.T) {
	v := CheckReleases([]ActivityLog{releaseFixture(time.Now())})
	require.True(t, v.OK(), "%v", v.Violations)
	assert.Equal(t, ReleaseVerdict{Activities: 1, Transactions: 1, Unconfirmed: 1, Promoted: 1}, v)
}

// TestReleaseCheckCatchesEachBrokenRule breaks each promise of the
// service's releases in turn and requires the check to say which.
func TestReleaseCheckCatchesEachBrokenRule(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		broken func(l *ActivityLog)
		want   string
	}{
		"released before confirm_by": {func(l *ActivityLog) {
			early := t0.Add(6 * time.Second)
			l.ConfirmBy = &early
		}, "before its moment"},
		"a confirmed registration released": {func(l *ActivityLog) {
			l.Events[6].RegistrationID, l.Events[8].RegistrationID = "r0", "r1"
		}, "after it was confirmed"},
		"a seat got at confirm_by released as unconfirmed": {func(l *ActivityLog) {
			l.Events[1].At = *l.ConfirmBy
		}, "after it was confirmed"},
		"a no-show released after its check-in": {func(l *ActivityLog) {
			l.NoShowsAt, l.ConfirmBy = l.ConfirmBy, nil
			l.Events[6].Reason = ReasonNoShow
			l.Events[5].RegistrationID = "r1"
		}, "after its check-in"},
		"a rule the activity does not have": {func(l *ActivityLog) {
			l.Events[6].Reason = ReasonNoShow
		}, "without that rule"},
		"a waiting registration released": {func(l *ActivityLog) {
			l.Events[6].RegistrationID, l.Events[6].From = "r3", waitlisted
		}, "only a seat is released"},
		"a release by a user": {func(l *ActivityLog) {
			l.Events[6].Actor = "user:u"
		}, "not the service"},
		"the line promoted out of order": {func(l *ActivityLog) {
			second := l.Events[7]
			l.Events[7].RegistrationID, second.Seq = "r3", 9
			l.Events = append(l.Events[:8], second)
		}, "promoted by a release after a party"},
		"a gap in the log": {func(l *ActivityLog) {
			l.Events[4].Seq = 50
		}, "a gap or a reorder"},
	} {
		t.Run(name, func(t *testing.T) {
			l := releaseFixture(t0)
			tc.broken(&l)
			v := CheckReleases([]ActivityLog{l})
			require.False(t, v.OK())
			assert.True(t, strings.Contains(strings.Join(v.Violations, "\n"), tc.want), "%v", v.Violations)
		})
	}
}

// TestAReleaseInAPoolPromotesWhatThePoolAllows: a_1 and a_2 share a pool
// of 2 seats; u0 holds a_1's seat and u1 a_2's, u2 waits on a_1. The
// release of u1's seat on a_2 may promote u2 on a_1 in its transaction
// (a_2's log records no promotion of its own); the pool check counts the
// released seat free from the release's start.
func TestAReleaseInAPoolPromotesWhatThePoolAllows(t *testing.T) {
	b := twoInAPool(2, "strict")
	b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, admitted("r0"))
	b.add(history.Signup, partyOn(act2, 1, 1), 21, 30, history.Answered, admitted("r1"))
	b.add(history.Signup, partyOn(act, 2, 1), 31, 40, history.Answered,
		history.Output{Status: 202, Registration: "r2", RegStatus: waitlisted, Seats: 1, Position: 1})
	op := releaseOp(act2, ReasonNoShow, 1, []string{"r1"}, nil, 50, 60)
	op.ID, op.Logical = len(b.h.Ops), 100
	b.h.Ops = append(b.h.Ops, op)
	b.add(history.ReadActivity, history.Input{Key: act}, 70, 80, history.Answered, readWith(2, 0, 5, 0, true))
	b.add(history.ReadPool, history.Input{Key: pool}, 81, 82, history.Answered, poolRead(2, 2))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)

	// A release that names a promotion of a party the pool left waiting
	// is not explained.
	b = twoInAPool(2, "strict")
	b.add(history.Signup, partyOn(act, 0, 2), 10, 20, history.Answered,
		history.Output{Status: 201, Registration: "r0", RegStatus: pending, Seats: 2})
	b.add(history.Signup, partyOn(act, 1, 1), 21, 30, history.Answered,
		history.Output{Status: 202, Registration: "r1", RegStatus: waitlisted, Seats: 1, Position: 1})
	op = releaseOp(act, ReasonNoShow, 2, []string{"r0"}, []string{"r9"}, 50, 60)
	op.ID, op.Logical = len(b.h.Ops), 100
	b.h.Ops = append(b.h.Ops, op)
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result)
}
