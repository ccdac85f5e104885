package attendance_test

import (
	"fmt"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/physiciansnet/capacityd/attendance"
)

// exactTail returns P(Binomial(n, p) > k) in exact rationals.
func exactTail(n int, p *big.Rat, k int) *big.Rat {
	q := new(big.Rat).Sub(big.NewRat(1, 1), p)
	sum := new(big.Rat)
	for j := k + 1; j <= n; j++ {
		c := new(big.Int).Binomial(int64(n), int64(j))
		term := new(big.Rat).SetInt(c)
		term.Mul(term, ratPow(p, j))
		term.Mul(term, ratPow(q, n-j))
		sum.Add(sum, term)
	}
	return sum
}

func ratPow(x *big.Rat, e int) *big.Rat {
	out := big.NewRat(1, 1)
	for range e {
		out.Mul(out, x)
	}
	return out
}

// bruteCapacity scans n upwards from room in exact rationals: the largest
// n with P(Binomial(n, p) > room) ≤ risk, the tail growing with n.
func bruteCapacity(room int, p *big.Rat, risk *big.Rat) int {
	n := room
	for n < 100*room && exactTail(n+1, p, room).Cmp(risk) <= 0 {
		n++
	}
	return n
}

func TestAttendanceBinomialTailIsExact(t *testing.T) {
	for _, c := range []struct {
		n, k     int
		num, den int64
	}{{10, 3, 1, 2}, {40, 30, 4, 5}, {60, 10, 1, 10}, {80, 70, 19, 20}, {25, 0, 1, 3}, {120, 95, 3, 4}, {7, 6, 99, 100}} {
		p := big.NewRat(c.num, c.den)
		pf, _ := p.Float64()
		want, _ := exactTail(c.n, p, c.k).Float64()
		got := attendance.BinomialTail(c.n, pf, c.k)
		assert.InDelta(t, want, got, 1e-12+want*1e-9, "n=%d k=%d p=%d/%d", c.n, c.k, c.num, c.den)
	}
	assert.Zero(t, attendance.BinomialTail(10, 0.5, 10), "never more than n")
	assert.Equal(t, 1.0, attendance.BinomialTail(10, 1, 9))
	assert.Zero(t, attendance.BinomialTail(10, 0, 0))
}

func TestAttendanceSuggestedCapacityAgainstBruteForce(t *testing.T) {
	for _, c := range []struct {
		room     int
		num, den int64 // show rate
		risk     string
	}{
		{10, 4, 5, "0.05"},
		{20, 1, 2, "0.1"},
		{5, 3, 10, "0.01"},
		{30, 9, 10, "0.05"},
		{12, 2, 3, "0.2"},
		{3, 1, 2, "0.5"},
		{50, 83, 120, "0.05"},
		{1, 1, 4, "0.05"},
	} {
		t.Run(fmt.Sprintf("room %d rate %d/%d risk %s", c.room, c.num, c.den, c.risk), func(t *testing.T) {
			p := big.NewRat(c.num, c.den)
			risk, _ := new(big.Rat).SetString(c.risk)
			pf, _ := p.Float64()
			rf, _ := risk.Float64()
			want := bruteCapacity(c.room, p, risk)
			got := attendance.SuggestedCapacity(c.room, pf, rf)
			assert.Equal(t, want, got)
			assert.GreaterOrEqual(t, got, c.room)
		})
	}
}

func TestAttendanceSuggestedCapacityBounds(t *testing.T) {
	assert.Equal(t, 40, attendance.SuggestedCapacity(40, 1, 0.05), "everyone comes: the room itself")
	assert.Equal(t, 4000, attendance.SuggestedCapacity(40, 0, 0.05), "nobody comes: the bound, 100 times the room")
	assert.Equal(t, 1_000_000, attendance.SuggestedCapacity(20_000, 0.001, 0.05), "never above the largest capacity")
	assert.Equal(t, 1_000_000, attendance.SuggestedCapacity(1_000_000, 0.999, 0.05), "never below the room")
	// A large room is answered quickly, and close to the normal
	// approximation's answer (n·p + z·sqrt(n·p·q) ≈ room).
	n := attendance.SuggestedCapacity(100_000, 0.7, 0.05)
	assert.InDelta(t, 142_450, n, 100)
	assert.LessOrEqual(t, attendance.BinomialTail(n, 0.7, 100_000), 0.05)
	assert.Greater(t, attendance.BinomialTail(n+1, 0.7, 100_000), 0.05)
}
