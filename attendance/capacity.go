package attendance

import (
	"math"

	"github.com/physiciansnet/capacityd/registration"
)

// Overbooking: how many registrations an activity may take for a room of a
// given size when some of those registered do not come.
//
// The model is that each registration comes independently of the others,
// with the probability the series' past activities show (its show rate).
// That assumption has a limit: people who come together — a party of
// several seats on one registration counts once here, but colleagues,
// groups and classes on separate registrations come or stay away as one,
// and so does everyone on a day of storm or strike. Such correlated
// absences make the real spread of the turnout wider than the binomial's,
// and the room overflows more often than risk says. Keep risk small, or
// size the room for the groups you know of, when attendance is correlated.

// DefaultRisk is the default chance of more people than the room holds.
const DefaultRisk = 0.05

// MaxRoom is the largest room an estimate takes.
const MaxRoom = registration.MaxCapacity

// overbookFactor bounds the search: at most this many times the room.
const overbookFactor = 100

// SuggestedCapacity returns the largest capacity n such that, when each of
// n registrations comes independently with probability showRate, the
// chance that more than room come is at most risk:
//
//	max { n : room ≤ n ≤ bound, P(Binomial(n, showRate) > room) ≤ risk }
//
// where bound is 100 times the room, and never more than an activity's
// largest capacity (registration.MaxCapacity). The answer is never below
// room: n = room never overflows (with showRate 1 it is the answer). The
// tail is exact (BinomialTail), not an approximation; it grows with n, so
// the largest n is found by bisection.
func SuggestedCapacity(room int, showRate, risk float64) int {
	if room < 1 {
		return 0
	}
	lo, hi := room, max(room, min(overbookFactor*room, registration.MaxCapacity))
	if BinomialTail(hi, showRate, room) <= risk {
		return hi
	}
	// BinomialTail(lo) = 0 ≤ risk < BinomialTail(hi).
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if BinomialTail(mid, showRate, room) <= risk {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// BinomialTail returns P(X > k) for X ~ Binomial(n, p), exactly up to
// floating point: the smaller of the two tails is summed term by term (the
// first term from log-gamma, the next ones by the ratio of consecutive
// terms), from the term next to the mode outwards, until what is left is
// provably below the sum's last bit.
func BinomialTail(n int, p float64, k int) float64 {
	switch {
	case k >= n || p <= 0:
		return 0
	case k < 0:
		return 1
	case p >= 1:
		return 1
	}
	mode := int(math.Floor(float64(n+1) * p))
	if k+1 >= mode {
		// The terms from k+1 up decrease: sum the upper tail.
		return math.Min(1, sumTerms(n, p, k+1, +1))
	}
	// The terms from k down decrease: sum the lower tail.
	return math.Max(0, 1-sumTerms(n, p, k, -1))
}

// sumTerms sums P(X = j) for j from j0 in direction dir (+1 up to n, -1
// down to 0), where the terms decrease from j0 on. The ratio of a term to
// the previous one decreases along the way, so once it is r < 1 the rest
// is at most term·r/(1−r): the sum stops when that is below its precision.
func sumTerms(n int, p float64, j0, dir int) float64 {
	q := 1 - p
	lt := logChoose(n, j0) + float64(j0)*math.Log(p) + float64(n-j0)*math.Log1p(-p)
	term := math.Exp(lt)
	sum := term
	for j := j0; term > 0; {
		var r float64
		if dir > 0 {
			if j == n {
				break
			}
			r = float64(n-j) / float64(j+1) * p / q
		} else {
			if j == 0 {
				break
			}
			r = float64(j) / float64(n-j+1) * q / p
		}
		if r < 1 && term*r/(1-r) <= sum*1e-17 {
			break
		}
		term *= r
		sum += term
		j += dir
	}
	return sum
}

// logChoose returns log C(n, j).
func logChoose(n, j int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(j + 1))
	c, _ := math.Lgamma(float64(n - j + 1))
	return a - b - c
}
