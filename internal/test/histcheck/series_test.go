package histcheck

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// Histories of a series: activities a_1, a_2 and a_3 of series s_1, of 5
// seats each; user u of each is the same person.

const (
	series = "s_1"
	act3   = "a_3"
)

// inSeries is series s_1 allowing most registrations per user, with its
// three activities.
func inSeries(most int) *builder {
	b := (&builder{}).add(history.CreateSeries, history.Input{Key: series, MaxPerUser: most}, 0, 1, history.Answered,
		history.Output{Status: 201, ID: series})
	for _, key := range []string{act, act2, act3} {
		b.add(history.CreateActivity, history.Input{Key: key, Capacity: 5, Waitlist: true, Users: 5, MaxSeats: 4, Series: series},
			2, 3, history.Answered, history.Output{Status: 201, Capacity: 5, Waitlist: true})
	}
	return b
}

func limitReached(held ...string) history.Output {
	return history.Output{Status: 409, Code: "limit_reached", Registrations: held}
}

func TestSeriesHistoryIsLinearizable(t *testing.T) {
	b := inSeries(2)
	b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, seated("r1", 1))
	b.add(history.Signup, partyOn(act2, 0, 1), 21, 30, history.Answered, seated("r2", 1))
	b.add(history.Signup, partyOn(act3, 0, 1), 31, 40, history.Answered, limitReached("r1", "r2"))
	// Another user is not held to u0's registrations.
	b.add(history.Signup, partyOn(act3, 1, 1), 41, 50, history.Answered, seated("t1", 1))
	// A cancellation frees the slot.
	b.add(history.Cancel, cancelOn(act, 0, "r1", 1), 51, 60, history.Answered, cancelledWith("r1", 1))
	b.add(history.Signup, partyOn(act3, 0, 1), 61, 70, history.Answered, seated("t0", 1))
	// A refusal may meet a registration being cancelled, or being made.
	b.add(history.Cancel, cancelOn(act2, 0, "r2", 1), 71, 90, history.Answered, cancelledWith("r2", 1))
	b.add(history.Signup, partyOn(act, 0, 1), 72, 80, history.Answered, limitReached("r2", "t0"))
	b.add(history.Signup, partyOn(act2, 0, 1), 100, 120, history.Answered, seated("r3", 1))
	b.add(history.Signup, partyOn(act, 0, 1), 110, 130, history.Answered, limitReached("r3", "t0"))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
	require.Equal(t, SeriesVerdict{Series: 1, Activities: 3, Registrations: 5, Refusals: 3}, r.Series)
	require.Equal(t, 3, r.Authority.Partitions)
}

func TestUserOverTheSeriesLimitIsCaught(t *testing.T) {
	// Two concurrent signups of one user in a series of at most 1: each
	// activity on its own is right.
	b := inSeries(1)
	b.add(history.Signup, partyOn(act, 0, 1), 10, 30, history.Answered, seated("r1", 1))
	b.add(history.Signup, partyOn(act2, 0, 1), 15, 35, history.Answered, seated("r2", 1))
	r := Check(b.h, opts)
	require.Equal(t, porcupine.Ok, r.Authority.Result, "%s", r)
	require.False(t, r.OK())
	require.Len(t, r.Series.Violations, 1)
	require.Contains(t, r.Series.Violations[0], "user 0 of series s_1 (at most 1): at 35 2 registrations were surely active: r1, r2")
	require.Contains(t, r.String(), "series    Illegal")

	// One after the other, with a cancellation sent between, they fit.
	b = inSeries(1)
	b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, seated("r1", 1))
	b.add(history.Cancel, cancelOn(act, 0, "r1", 1), 25, 50, history.Unknown, history.Output{Error: "timeout"})
	b.add(history.Signup, partyOn(act2, 0, 1), 30, 40, history.Answered, seated("r2", 1))
	r = Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
	// Not without it.
	b = inSeries(1)
	b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, seated("r1", 1))
	b.add(history.Signup, partyOn(act2, 0, 1), 30, 40, history.Answered, seated("r2", 1))
	require.False(t, Check(b.h, opts).Series.OK())
}

func TestLimitRefusalWithoutReasonIsCaught(t *testing.T) {
	// The user holds 1 of 2.
	b := inSeries(2)
	b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, seated("r1", 1))
	b.add(history.Signup, partyOn(act2, 0, 1), 30, 40, history.Answered, limitReached("r1"))
	r := Check(b.h, opts)
	require.False(t, r.Series.OK())
	require.Contains(t, r.Series.Violations[0], "user 0 refused at the limit of series s_1 (2) on a_2 from 30 to 40, holding at most 1")

	// A signup without an answer may hold the second.
	b = inSeries(2)
	b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, seated("r1", 1))
	b.add(history.Signup, partyOn(act3, 0, 1), 21, 25, history.Unknown, history.Output{Error: "timeout"})
	b.add(history.Signup, partyOn(act2, 0, 1), 30, 40, history.Answered, limitReached("r1", "t0"))
	require.True(t, Check(b.h, opts).OK())
	// A registration cancelled before the refusal does not.
	b = inSeries(1)
	b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, seated("r1", 1))
	b.add(history.Cancel, cancelOn(act, 0, "r1", 1), 21, 25, history.Answered, cancelledWith("r1", 1))
	b.add(history.Signup, partyOn(act2, 0, 1), 30, 40, history.Answered, limitReached("r1"))
	require.False(t, Check(b.h, opts).Series.OK())
	// Nor does a refused signup.
	b = inSeries(1)
	b.add(history.Signup, partyOn(act, 0, 5), 10, 20, history.Answered, history.Output{Status: 400, Code: "invalid_request"})
	b.add(history.Signup, partyOn(act2, 0, 1), 30, 40, history.Answered, limitReached())
	require.False(t, Check(b.h, opts).Series.OK())
	// A refusal naming fewer registrations than the limit is wrong.
	b = inSeries(2)
	b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, seated("r1", 1))
	b.add(history.Signup, partyOn(act3, 0, 1), 21, 25, history.Answered, seated("t0", 1))
	b.add(history.Signup, partyOn(act2, 0, 1), 30, 40, history.Answered, limitReached("r1"))
	require.Contains(t, Check(b.h, opts).Series.Violations[0], "naming 1 registrations")
}

func TestLimitRefusalOutsideASeriesIsIllegal(t *testing.T) {
	b := createdIn(&builder{}, act, 5, true, "strict")
	b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, limitReached())
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result)
	// In a series, the activity's own refusals come first.
	b = inSeries(1)
	b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, seated("r1", 1))
	b.add(history.Signup, partyOn(act, 0, 1), 30, 40, history.Answered, limitReached("r1"))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result, "already registered first")
	b = inSeries(1)
	b.add(history.Signup, partyOn(act, 0, 5), 30, 40, history.Answered, limitReached())
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result, "too many seats first")
}

func TestBlockSignupInASeriesMayMeetTheLimit(t *testing.T) {
	// A code does not lift the limit: the refusal leaves the block's seats
	// reserved.
	b := inSeries(1)
	b.add(history.CreateBlock, history.Input{Key: act2, Seats: 2, Code: "x"}, 4, 5, history.Answered, blockMade("b1", 2))
	b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, seated("r1", 1))
	in := partyOn(act2, 0, 1)
	in.Code = "x"
	b.add(history.Signup, in, 30, 40, history.Answered, limitReached("r1"))
	b.add(history.ReadActivity, history.Input{Key: act2}, 41, 42, history.Answered, readReserved(0, 2, 0, 5, 3))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
}

func TestCodeSignupOverTheSeriesLimitIsCaught(t *testing.T) {
	// A block's code does not lift the limit: a seat from it over the
	// limit is caught by the series check, each activity on its own being
	// right.
	b := inSeries(1)
	b.add(history.CreateBlock, history.Input{Key: act2, Seats: 2, Code: "x"}, 4, 5, history.Answered, blockMade("b1", 2))
	b.add(history.Signup, partyOn(act, 0, 1), 10, 20, history.Answered, seated("r1", 1))
	in := partyOn(act2, 0, 1)
	in.Code = "x"
	b.add(history.Signup, in, 30, 40, history.Answered, seated("r2", 1))
	r := Check(b.h, opts)
	require.Equal(t, porcupine.Ok, r.Authority.Result, "%s", r)
	require.False(t, r.Series.OK())
	require.Contains(t, r.Series.Violations[0], "user 0 of series s_1 (at most 1): at 40 2 registrations were surely active: r1, r2")
}

func TestPooledSeriesActivitiesAreChecked(t *testing.T) {
	// a_1 and a_2 share pool p_1 and series s_1 (at most 1 per user).
	inBoth := func() *builder {
		b := (&builder{}).add(history.CreateSeries, history.Input{Key: series, MaxPerUser: 1}, 0, 1, history.Answered,
			history.Output{Status: 201, ID: series})
		createdPool(b, pool, 4)
		for _, key := range []string{act, act2} {
			b.add(history.CreateActivity, history.Input{Key: key, Capacity: 5, Waitlist: true, Users: 5, MaxSeats: 4, Policy: "strict",
				Pools: []string{pool}, Series: series}, 2, 3, history.Answered, history.Output{Status: 201, Capacity: 5, Waitlist: true})
		}
		return b.add(history.Signup, partyOn(act, 0, 2), 10, 20, history.Answered, seated("r1", 2))
	}
	b := inBoth()
	b.add(history.Signup, partyOn(act2, 0, 1), 30, 40, history.Answered, limitReached("r1"))
	b.add(history.Signup, partyOn(act2, 1, 2), 41, 50, history.Answered, seated("t1", 2))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
	require.Equal(t, SeriesVerdict{Series: 1, Activities: 2, Registrations: 2, Refusals: 1}, r.Series)

	b = inBoth()
	b.add(history.Signup, partyOn(act2, 0, 1), 30, 40, history.Answered, seated("r2", 1))
	r = Check(b.h, opts)
	require.Equal(t, porcupine.Ok, r.Authority.Result, "%s", r)
	require.True(t, r.Pools.OK(), "%s", r)
	require.False(t, r.Series.OK(), "over the limit across a pool's activities")
}
