package histcheck

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// Histories of an on-sale: activity a_q of 2 seats without a waiting
// list, for users u0 to u4, opening at 100 s behind a queue that admits 2
// a second, at most 2 tokens out, tokens valid 10 s, places lapsing after
// 10 s without their holder.

const onSale = "a_q"

func sec(s float64) int64 { return int64(s * 1e9) }

func queueAnswer(state string, position int64, token string, expires float64) history.Output {
	return history.Output{Status: 200, QueueState: state, QueuePosition: position, Token: token, TokenExpires: sec(expires)}
}

func join(b *builder, u int, at float64, out history.Output) {
	b.add(history.JoinQueue, history.Input{Key: onSale, User: u}, sec(at), sec(at+0.01), history.Answered, out)
}

func poll(b *builder, u int, at float64, out history.Output) {
	b.add(history.ReadQueue, history.Input{Key: onSale, User: u}, sec(at), sec(at+0.01), history.Answered, out)
}

func signupWith(u int, token, key string) history.Input {
	return history.Input{Key: onSale, User: u, AdmissionToken: token, IdempotencyKey: key}
}

// sale is the history of a good on-sale: u2 and u0 admitted at the
// opening, u2 signs up (and replays it), u0 lets its token expire; u3
// lapses, so u1 behind it is admitted once u0's token is gone and signs
// up; the activity is full, and u4, who joined after the opening, is sold
// out.
func sale() *builder {
	opens := sec(100)
	b := (&builder{}).add(history.CreateActivity, history.Input{Key: onSale, Capacity: 2, Users: 5, OpensAt: &opens,
		Queue: &history.Queue{AdmitPerSecond: 2, MaxAdmitted: 2, TokenSeconds: 10, AbsentSeconds: 10}}, 0, 1,
		history.Answered, history.Output{Status: 201, Capacity: 2})
	for u := range 4 {
		join(b, u, 10+float64(u), queueAnswer("waiting", 0, "", 0))
	}
	b.add(history.Signup, signupWith(3, "", "k3"), sec(50), sec(50.1), history.Answered,
		history.Output{Status: 409, Code: "registration_closed"})
	poll(b, 3, 100.4, queueAnswer("waiting", 3, "", 0))
	poll(b, 2, 101.2, queueAnswer("admitted", 1, "t2", 111))
	poll(b, 0, 101.3, queueAnswer("admitted", 2, "t0", 111))
	poll(b, 1, 102, queueAnswer("waiting", 4, "", 0))
	b.add(history.Signup, signupWith(0, "", "k0"), sec(102), sec(102.1), history.Answered,
		history.Output{Status: 403, Code: "admission_required"})
	// The answer to u2's signup is lost; the retry is answered from the
	// stored outcome: one use of t2.
	b.attempt(100, history.Signup, signupWith(2, "t2", "k2"), sec(102), sec(103), history.Unknown, history.Output{Error: "EOF"})
	b.attempt(100, history.Signup, signupWith(2, "t2", "k2"), sec(104), sec(104.1), history.Answered, admitted("r2"))
	join(b, 4, 105, queueAnswer("waiting", 5, "", 0))
	poll(b, 1, 112.5, queueAnswer("admitted", 4, "t1", 122))
	b.add(history.Signup, signupWith(1, "t1", "k1"), sec(113), sec(113.5), history.Answered, admitted("r1"))
	b.add(history.ReadActivity, history.Input{Key: onSale}, sec(116), sec(116.1), history.Answered, read(2, 0, 2, false))
	poll(b, 4, 116, queueAnswer("sold_out", 5, "", 0))
	b.h.Authority = &history.Authority{
		Places: []history.Place{
			{Key: onSale, User: 2, Position: 1, State: "used", Token: "t2", JoinedAt: sec(12), LastSeenAt: sec(100.5),
				AdmittedAt: sec(101), TokenExpires: sec(111)},
			{Key: onSale, User: 0, Position: 2, State: "expired", Token: "t0", JoinedAt: sec(10), LastSeenAt: sec(100.5),
				AdmittedAt: sec(101), TokenExpires: sec(111)},
			{Key: onSale, User: 3, Position: 3, State: "expired", JoinedAt: sec(13), LastSeenAt: sec(100.5)},
			{Key: onSale, User: 1, Position: 4, State: "used", Token: "t1", JoinedAt: sec(11), LastSeenAt: sec(111),
				AdmittedAt: sec(112), TokenExpires: sec(122)},
			{Key: onSale, User: 4, Position: 5, State: "sold_out", JoinedAt: sec(105), LastSeenAt: sec(113)},
		},
		Registrations: []history.Registration{{ID: "r2", Key: onSale, User: 2, Status: pending}, {ID: "r1", Key: onSale, User: 1, Status: pending}},
	}
	return b
}

func TestOnSaleHistoryKeepsTheQueuesPromises(t *testing.T) {
	r := Check(sale().h, opts)
	require.True(t, r.OK(), "%s", r)
	require.Equal(t, QueueVerdict{Lines: 1, Places: 5, Admitted: 3, Answers: 11, Signups: 2}, r.Queue)
	require.Contains(t, r.String(), "queue     Ok")
}

// place returns the authority's place of user u in b's history.
func place(b *builder, u int) *history.Place {
	i := slices.IndexFunc(b.h.Authority.Places, func(p history.Place) bool { return p.User == u })
	return &b.h.Authority.Places[i]
}

// queueViolation checks b's history and requires a queue violation
// containing want.
func queueViolation(t *testing.T, b *builder, want string) {
	t.Helper()
	r := Check(b.h, opts)
	require.False(t, r.Queue.OK(), "%s", r)
	require.True(t, slices.ContainsFunc(r.Queue.Violations, func(v string) bool { return strings.Contains(v, want) }),
		"want %q among %q", want, r.Queue.Violations)
}

func TestOutOfOrderAdmissionIsCaught(t *testing.T) {
	// u3's place, ahead of u1's, was present 5 s before u1 was seen
	// admitted: it could not have lapsed yet.
	b := sale()
	place(b, 3).LastSeenAt = sec(105)
	queueViolation(t, b, "position 4 (user 1) admitted while position 3 (user 3) lapsed after 112510000000 (last present at 105000000000)")

	// u0, ahead of u1, admitted after u1 was seen admitted.
	b = sale()
	place(b, 0).AdmittedAt, place(b, 0).TokenExpires = sec(115), sec(125)
	queueViolation(t, b, "position 4 (user 1) admitted while position 2 (user 0) was admitted only at 115000000000, after 112510000000")

	// u3 still waiting.
	b = sale()
	place(b, 3).State = "waiting"
	queueViolation(t, b, "position 4 (user 1) admitted while position 3 (user 3) still waits")

	// u3 sold out after u1's admission (it was present later).
	b = sale()
	place(b, 3).State, place(b, 3).LastSeenAt = "sold_out", sec(114)
	queueViolation(t, b, "position 4 (user 1) admitted while position 3 (user 3) was sold out after 112510000000")

	// Admitted before the opening.
	b = sale()
	place(b, 2).AdmittedAt = sec(99)
	queueViolation(t, b, "user 2's place at 1 was admitted at 99000000000, before the opening")
	// Refused as closed once open.
	b = sale()
	b.add(history.Signup, signupWith(3, "", "k6"), sec(103), sec(103.1), history.Answered,
		history.Output{Status: 409, Code: "registration_closed"})
	queueViolation(t, b, "user 3's signup sent at 103000000000, after the opening at 100000000000, was refused as closed")
}

func TestAdmissionTimesAreWhenTransactionsBegan(t *testing.T) {
	// An advance whose transaction began before another's may take the
	// line's lock after it: u0's admission, after u1's, carries a time
	// before it. u1 was surely admitted only when its token was shown.
	b := sale()
	place(b, 0).AdmittedAt, place(b, 0).TokenExpires = sec(112.3), sec(122.3)
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
	// So may a lapse's, after u1's admission.
	b = sale()
	place(b, 3).LastSeenAt = sec(102)
	r = Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
}

func TestTokenUsedTwiceIsCaught(t *testing.T) {
	b := sale()
	b.add(history.Signup, signupWith(2, "t2", "k9"), sec(118), sec(118.1), history.Answered, admitted("r9"))
	b.h.Authority.Registrations = append(b.h.Authority.Registrations, history.Registration{ID: "r9", Key: onSale, User: 2, Status: pending})
	queueViolation(t, b, "token t2 made two registrations, r2 and r9")
	queueViolation(t, b, "user 2 has 2 registrations and 1 used admission tokens")

	// Another user's token.
	b = sale()
	b.add(history.Signup, signupWith(3, "t1", "k8"), sec(118), sec(118.1), history.Answered, admitted("r8"))
	queueViolation(t, b, "user 3's registration r8 was made with token t1, never issued to them")
	queueViolation(t, b, "token t1 made two registrations, r1 and r8")
}

func TestMovedPositionIsCaught(t *testing.T) {
	b := sale()
	poll(b, 1, 103, queueAnswer("waiting", 3, "", 0))
	queueViolation(t, b, "user 1 was shown 2 positions after 1 joins: a position moved")
	queueViolation(t, b, "user 1 was shown position 3 (op 18), which none of their places has")
	queueViolation(t, b, "position 3 shown to user 3 and to user 1")

	// From the history alone.
	b.h.Authority = nil
	queueViolation(t, b, "user 1 was shown 2 positions after 1 joins")

	// A token shown at another position than the authority keeps.
	b = sale()
	poll(b, 1, 113, queueAnswer("admitted", 5, "t1", 122))
	queueViolation(t, b, "user 1 was shown token t1 at position 5 (op 18); the authority keeps it at 4")
}

func TestRegistrationWithoutATokenIsCaught(t *testing.T) {
	b := sale()
	b.add(history.Signup, signupWith(3, "", "k7"), sec(118), sec(118.1), history.Answered, admitted("r7"))
	queueViolation(t, b, "user 3's registration r7 was made without an admission token")

	// One the history never saw: the authority's rows show it.
	b = sale()
	b.h.Authority.Registrations = append(b.h.Authority.Registrations, history.Registration{ID: "r6", Key: onSale, User: 3, Status: pending})
	queueViolation(t, b, "user 3 has 1 registrations and 0 used admission tokens")
}

func TestUserAdmittedTwiceIsCaught(t *testing.T) {
	// u0 joined again while its token was live and was admitted again.
	b := sale()
	poll(b, 0, 106, queueAnswer("admitted", 6, "t5", 116))
	b.h.Authority.Places = append(b.h.Authority.Places, history.Place{Key: onSale, User: 0, Position: 6, State: "expired", Token: "t5",
		JoinedAt: sec(104), LastSeenAt: sec(104), AdmittedAt: sec(105), TokenExpires: sec(116)})
	queueViolation(t, b, "user 0 held two live admissions, tokens t0 and t5, at 106010000000")

	// A place taken after one used.
	b = sale()
	b.h.Authority.Places = append(b.h.Authority.Places, history.Place{Key: onSale, User: 2, Position: 6, State: "expired",
		JoinedAt: sec(114), LastSeenAt: sec(114)})
	queueViolation(t, b, "user 2 took a place (position 6) after the one they used (position 1)")

	// Two places that are not expired.
	b = sale()
	b.h.Authority.Places = append(b.h.Authority.Places, history.Place{Key: onSale, User: 4, Position: 6, State: "waiting",
		JoinedAt: sec(114), LastSeenAt: sec(114)})
	queueViolation(t, b, "user 4 holds 2 places that are not expired")
}

func TestQueueCheckNeedsTheAuthoritysRows(t *testing.T) {
	b := sale()
	b.h.Authority = nil
	queueViolation(t, b, "the authority's places and registrations were not recorded")
}

func TestAdmissionRefusalsAreIllegalWithoutAQueue(t *testing.T) {
	b := created(&builder{}, 2, false)
	b.add(history.Signup, signup(0), 10, 20, history.Answered, history.Output{Status: 403, Code: "admission_required"})
	require.False(t, Check(b.h, opts).OK())
	b = created(&builder{}, 2, false)
	b.add(history.Signup, signup(0), 10, 20, history.Answered, history.Output{Status: 409, Code: "registration_closed"})
	require.False(t, Check(b.h, opts).OK())
}
