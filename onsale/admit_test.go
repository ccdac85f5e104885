package onsale

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/registration"
)

// TestDecideAdvance: the rate's allowance accrues only while the line is
// open and is spent by admissions; admissions stop at the allowance, the
// places waiting, the cap and, without a waiting list, the seats every
// live token holds; with a waiting list they go on into it; an activity
// full without one is sold out.
func TestDecideAdvance(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	before, after := t0.Add(-time.Second), t0.Add(time.Second)
	settings := registration.QueueSettings{AdmitPerSecond: 10, MaxAdmitted: 100, TokenSeconds: 60, AbsentSeconds: 60}
	open := func(mod func(*AdvanceInput)) AdvanceInput {
		in := AdvanceInput{Now: t0, Settings: settings, Shuffled: true, Credit: Credit{Allowance: 0, At: t0.Add(-time.Second)},
			Remaining: 1000, MaxSeats: 1, Waiting: 1000}
		mod(&in)
		return in
	}
	for _, c := range []struct {
		name      string
		in        AdvanceInput
		admit     int64
		allowance float64
		soldOut   bool
	}{
		{"a second's worth accrues and is spent", open(func(*AdvanceInput) {}), 10, 0, false},
		{"at most a second's worth is saved", open(func(in *AdvanceInput) { in.Credit.At = t0.Add(-time.Minute) }), 10, 0, false},
		{"a fraction is kept", open(func(in *AdvanceInput) { in.Credit.At = t0.Add(-250 * time.Millisecond) }), 2, 0.5, false},
		{"the clock never runs backwards", open(func(in *AdvanceInput) { in.Credit = Credit{Allowance: 3, At: after} }), 3, 0, false},
		{"before the opening nothing accrues", open(func(in *AdvanceInput) { in.OpensAt = &after }), 0, 0, false},
		{"not shuffled yet: nothing accrues", open(func(in *AdvanceInput) { in.Shuffled = false }), 0, 0, false},
		{"after the closing nothing accrues", open(func(in *AdvanceInput) { in.ClosesAt = &before }), 0, 0, false},
		{"open window", open(func(in *AdvanceInput) { in.OpensAt, in.ClosesAt = &before, &after }), 10, 0, false},
		{"no more than wait", open(func(in *AdvanceInput) { in.Waiting = 4 }), 4, 6, false},
		{"the cap counts the tokens out", open(func(in *AdvanceInput) { in.TokensOut = 97 }), 3, 7, false},
		{"the cap reached", open(func(in *AdvanceInput) { in.TokensOut = 100 }), 0, 10, false},
		{"the seats: no more tokens than seats", open(func(in *AdvanceInput) { in.Remaining, in.TokensOut = 12, 5 }), 7, 3, false},
		{"the seats held by the tokens out", open(func(in *AdvanceInput) { in.Remaining, in.TokensOut = 5, 5 }), 0, 10, false},
		{"a party's seats per token", open(func(in *AdvanceInput) { in.Remaining, in.MaxSeats, in.TokensOut = 40, 4, 6 }), 4, 6, false},
		{"the last token promises what remains", open(func(in *AdvanceInput) { in.Remaining, in.MaxSeats = 3, 4 }), 1, 9, false},
		{"while it is out, no other", open(func(in *AdvanceInput) { in.Remaining, in.MaxSeats, in.TokensOut = 3, 4, 1 }), 0, 10, false},
		{"sold out without a waiting list", open(func(in *AdvanceInput) { in.Remaining = 0 }), 0, 10, true},
		{"with a waiting list: on into it", open(func(in *AdvanceInput) { in.Remaining, in.TokensOut, in.Waitlist = 0, 5, true }), 10, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := DecideAdvance(c.in)
			require.Equal(t, c.admit, d.Admit, "admitted")
			require.InDelta(t, c.allowance, d.Credit.Allowance, 1e-9, "allowance left")
			require.Equal(t, c.soldOut, d.SoldOut, "sold out")
			require.False(t, d.Credit.At.Before(c.in.Credit.At), "the credit's time never goes back")
			require.False(t, d.Credit.At.Before(c.in.Now), "the credit is as of the advance")
		})
	}
}

// TestDecideAdvanceNeverPromisesASeatThatIsNotThere: over every small
// state, the seats the live tokens hold (SeatsPerToken each) never exceed
// what remains, without a waiting list.
func TestDecideAdvanceNeverPromisesASeatThatIsNotThere(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for remaining := range 25 {
		for maxSeats := 1; maxSeats <= 6; maxSeats++ {
			for out := int64(0); out*int64(SeatsPerToken(remaining, maxSeats)) <= int64(remaining); out++ {
				d := DecideAdvance(AdvanceInput{Now: now, Shuffled: true, Credit: Credit{Allowance: 100, At: now},
					Settings: registration.QueueSettings{AdmitPerSecond: 100, MaxAdmitted: 1000}, TokensOut: out,
					Remaining: remaining, MaxSeats: maxSeats, Waiting: 1000})
				held := (out + d.Admit) * int64(SeatsPerToken(remaining, maxSeats))
				require.LessOrEqual(t, held, max(int64(remaining), 0), "remaining %d, max seats %d, out %d", remaining, maxSeats, out)
				if out == 0 && remaining > 0 {
					require.Positive(t, d.Admit, "seats left and no token out: someone is admitted")
				}
			}
		}
	}
}
