package onsale

import (
	"math"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

// Credit is a line's rate allowance: the admissions it may still make
// (fractional, at most one second's worth) as of At.
type Credit struct {
	Allowance float64
	At        time.Time
}

// AdvanceInput is what an advance knows when it decides whom to admit, all
// read in the advance's transaction under the line's lock.
type AdvanceInput struct {
	// Now is the authority's time of the advance.
	Now      time.Time
	Settings registration.QueueSettings
	// OpensAt and ClosesAt are the activity's window (nil: unbounded).
	OpensAt, ClosesAt *time.Time
	// Shuffled is whether the places taken before the opening have their
	// positions (no place is admitted before).
	Shuffled bool
	Credit   Credit
	// TokensOut is the admitted places whose tokens are live and unused.
	TokensOut int64
	// Remaining is the seats a signup could still get; MaxSeats the most
	// one signup may take (max_seats_per_registration).
	Remaining, MaxSeats int
	// Waitlist is whether a signup that finds no seat waits for one.
	Waitlist bool
	// Waiting is the waiting places with a position.
	Waiting int64
}

// AdvanceDecision is what an advance does: admit the first Admit waiting
// places in position order, keep Credit, and, when SoldOut, mark every
// waiting place sold out.
type AdvanceDecision struct {
	Admit   int64
	Credit  Credit
	SoldOut bool
}

// DecideAdvance is the on-sale's admission rule, the pure part of an
// advance. The rate's allowance accrues (AdmitPerSecond a second, at most
// one second's worth) while the line is open (opened, shuffled, not
// closed) and is spent by admissions. Admissions are bounded by the
// allowance, the places waiting, the cap (MaxAdmitted tokens out at once)
// and, without a waiting list, the seats: every live token holds the seats
// its signup may take, so that an admitted holder who signs up in time is
// never refused as full. With a waiting list a signup that finds no seat
// waits for one, so admission goes on into the list. Without a waiting
// list, an activity with no seat left is sold out and admits no one.
func DecideAdvance(in AdvanceInput) AdvanceDecision {
	d := AdvanceDecision{Credit: Credit{At: in.Credit.At}}
	if in.Now.After(d.Credit.At) {
		d.Credit.At = in.Now
	}
	if lineOpen(in) {
		rate := float64(in.Settings.AdmitPerSecond)
		d.Credit.Allowance = math.Min(rate, in.Credit.Allowance+rate*max(0, in.Now.Sub(in.Credit.At).Seconds()))
	}
	if d.SoldOut = !in.Waitlist && in.Remaining <= 0; d.SoldOut {
		return d
	}
	n := min(int64(d.Credit.Allowance), int64(in.Settings.MaxAdmitted)-in.TokensOut, in.Waiting)
	if !in.Waitlist {
		n = min(n, tokensForSeats(in.Remaining, in.MaxSeats, in.TokensOut))
	}
	if n > 0 {
		d.Admit = n
		d.Credit.Allowance -= float64(n)
	}
	return d
}

// lineOpen reports whether the line admits at in.Now: shuffled, opened and
// not closed.
func lineOpen(in AdvanceInput) bool {
	return in.Shuffled && (in.OpensAt == nil || !in.Now.Before(*in.OpensAt)) &&
		(in.ClosesAt == nil || in.Now.Before(*in.ClosesAt))
}

// tokensForSeats is the tokens that may go out besides out ones when
// remaining seats are left and a signup may take up to maxSeats: each token
// holds SeatsPerToken(remaining, maxSeats) seats, so that remaining
// covers every live token's signup.
func tokensForSeats(remaining, maxSeats int, out int64) int64 {
	per := int64(SeatsPerToken(remaining, maxSeats))
	return max(0, int64(remaining)/per-out)
}

// SeatsPerToken is the seats a live admission token holds when remaining
// seats are left and one signup may take up to maxSeats: maxSeats, or what
// is left when less is (the last token of an activity promises what
// remains, not a whole party's seats). It is at least 1.
func SeatsPerToken(remaining, maxSeats int) int {
	return max(1, min(maxSeats, remaining))
}
