package loadtest

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
)

func TestAnswerStatus(t *testing.T) {
	t.Parallel()
	st, err := answer(nil, http.StatusOK)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, st)
	st, err = answer(&client.Error{Status: http.StatusServiceUnavailable, Code: client.CodeUnavailable}, http.StatusOK)
	require.NoError(t, err, "a refusal is an answer")
	require.Equal(t, http.StatusServiceUnavailable, st)
	st, err = answer(errors.New("connection reset"), http.StatusOK)
	require.Error(t, err, "no answer")
	require.Zero(t, st)

	st, _ = signupAnswer(client.SignupResult{Waitlisted: true}, nil)
	require.Equal(t, http.StatusAccepted, st)
	st, _ = signupAnswer(client.SignupResult{}, nil)
	require.Equal(t, http.StatusCreated, st)
	st, _ = signupAnswer(client.SignupResult{}, &client.Error{Status: http.StatusConflict, Code: client.CodeActivityFull})
	require.Equal(t, http.StatusConflict, st)
}

func TestStatusTally(t *testing.T) {
	t.Parallel()
	var tally statusTally
	for _, st := range []int{201, 201, 409, 500, 503, 0, 999} {
		tally.add(st)
	}
	require.EqualValues(t, 2, tally.count(201))
	require.EqualValues(t, 1, tally.count(409))
	require.EqualValues(t, 2, tally.fivexx())
	require.EqualValues(t, 2, tally.count(0), "no answer, and a status out of range")
}

func TestDistinctPositions(t *testing.T) {
	t.Parallel()
	require.EqualValues(t, 3, distinctPositions([]int32{0, 1, 2, 0, 3}))
	require.EqualValues(t, 2, distinctPositions([]int32{1, 1, 2}), "a position given twice counts once")
	require.Zero(t, distinctPositions(nil))
}

func waitlistedAt(id string, pos int) client.Registration {
	return client.Registration{ID: id, Status: client.Waitlisted, WaitlistPosition: &pos}
}

func TestInLine(t *testing.T) {
	t.Parallel()
	line, err := inLine([]client.Registration{waitlistedAt("c", 3), waitlistedAt("a", 1), waitlistedAt("b", 2)})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, line)

	_, err = inLine([]client.Registration{waitlistedAt("a", 1), waitlistedAt("b", 1)})
	require.ErrorContains(t, err, "given twice")
	_, err = inLine([]client.Registration{waitlistedAt("a", 1), waitlistedAt("b", 3)})
	require.Error(t, err)
	_, err = inLine([]client.Registration{{ID: "a"}})
	require.ErrorContains(t, err, "position 0 of a")
}

// ev is an event of the feed: seq, type, registration, the status it left
// and the request that recorded it.
func ev(seq int64, typ, reg string, from client.Status, req string) client.Event {
	e := client.Event{Seq: seq, Type: typ, RegistrationID: reg, RequestID: &req}
	if from != "" {
		e.From = &from
	}
	return e
}

func TestJudgePromotions(t *testing.T) {
	t.Parallel()
	line := []string{"w1", "w2", "w3"}
	events := []client.Event{
		ev(1, "registration.created", "s1", "", "r1"),
		ev(2, "registration.created", "s2", "", "r2"),
		ev(3, "registration.waitlisted", "w1", "", "r3"),
		ev(4, "registration.waitlisted", "w2", "", "r4"),
		ev(5, "registration.waitlisted", "w3", "", "r5"),
		// Each cancellation promotes the first in line, in its request.
		ev(6, eventCancelled, "s1", client.Pending, "c1"),
		ev(7, eventPromoted, "w1", client.Waitlisted, "c1"),
		// Out of line, and recorded by another request.
		ev(8, eventCancelled, "s2", client.Pending, "c2"),
		ev(9, eventPromoted, "w3", client.Waitlisted, "c3"),
		// A waitlisted registration's cancellation frees no seat.
		ev(10, eventCancelled, "w2", client.Waitlisted, "c4"),
		ev(11, eventPromoted, "w2", client.Waitlisted, "c4"),
	}
	p := judgePromotions(events, line)
	require.Equal(t, promotions{promoted: 3, inLine: 1, withCancel: 1}, p)

	// A gap in the seqs is not "right after".
	gap := []client.Event{ev(6, eventCancelled, "s1", client.Pending, "c1"), ev(8, eventPromoted, "w1", client.Waitlisted, "c1")}
	require.Equal(t, promotions{promoted: 1, inLine: 1}, judgePromotions(gap, line))
	// More promotions than the line is long do not run past it.
	require.EqualValues(t, 1, judgePromotions(events[6:7], nil).promoted)
}

func TestPickCourses(t *testing.T) {
	t.Parallel()
	picks := pickCourses(rand.New(rand.NewPCG(1, 2)), 2000, 5)
	require.Len(t, picks, 2000)
	counts := make([]int, 5)
	for _, p := range picks {
		require.NotEqual(t, p[0], p[1])
		require.NotEqual(t, p[0], p[2])
		require.NotEqual(t, p[1], p[2])
		for _, a := range p {
			counts[a]++
		}
	}
	for a, n := range counts {
		require.InDelta(t, 1200, n, 150, "activity %d is picked about 3/5 of the time", a)
	}
	require.Equal(t, picks, pickCourses(rand.New(rand.NewPCG(1, 2)), 2000, 5), "the same seed picks the same")
}

func TestCourseRunJudge(t *testing.T) {
	t.Parallel()
	r := newCourseRun(3)
	full := &client.Error{Status: http.StatusConflict, Code: client.CodeActivityFull}
	// Activity 0: 3 asked, 2 seats, one refused as full: exact and full.
	for _, err := range []error{nil, nil, full} {
		r.asked[0].Add(1)
		require.NoError(t, r.record(0, client.SignupResult{}, err))
	}
	// Activity 1: 2 asked, 2 admitted, but the authority says 1.
	for range 2 {
		r.asked[1].Add(1)
		require.NoError(t, r.record(1, client.SignupResult{}, nil))
	}
	// Activity 2: refused one as full with a seat free; a 503 fails.
	r.asked[2].Add(2)
	require.NoError(t, r.record(2, client.SignupResult{}, full))
	require.Error(t, r.record(2, client.SignupResult{}, &client.Error{Status: http.StatusServiceUnavailable}))
	require.Error(t, r.record(2, client.SignupResult{}, &client.Error{Status: http.StatusConflict, Code: client.CodeAlreadyRegistered}))

	inexact, refusedNotFull := r.judge([]int{2, 1, 1}, 2)
	require.EqualValues(t, 2, inexact, "activity 1 (2 asked, 1 taken) and 2 (2 asked, 1 taken)")
	require.EqualValues(t, 1, refusedNotFull, "activity 2")
	require.EqualValues(t, 2, r.full.Load())
	require.EqualValues(t, 1, r.answers.fivexx())
	require.EqualValues(t, 4, r.answers.count(http.StatusCreated))
}

func TestSizes(t *testing.T) {
	t.Parallel()
	require.Equal(t, FullSizes, Sizes{}.withDefaults())
	require.Equal(t, 500, Sizes{CourseUsers: 500}.withDefaults().CourseUsers)
	require.Less(t, QuickSizes.WaitlistCrowdUsers, FullSizes.WaitlistCrowdUsers)
	require.Less(t, QuickSizes.CourseUsers, FullSizes.CourseUsers)
	require.Less(t, QuickSizes.GroupUsers, FullSizes.GroupUsers)
	require.Less(t, QuickSizes.GroupActivities, FullSizes.GroupActivities)
	require.Equal(t, 20000, FullSizes.GroupUsers)
	require.Equal(t, 300, FullSizes.GroupActivities)
	require.Less(t, QuickSizes.PoolUsers, FullSizes.PoolUsers)
	require.Less(t, QuickSizes.PoolPools, FullSizes.PoolPools)
	require.Equal(t, 20000, FullSizes.PoolUsers)
	require.Equal(t, 100, FullSizes.PoolPools)
	require.Equal(t, FullSizes.FlashCrowdUsers, QuickSizes.FlashCrowdUsers)
	require.Empty(t, sizeNote("%d users", [2]int{20000, 20000}))
	require.Equal(t, "5000 users instead of 20000 users (a smaller run)", sizeNote("%d users", [2]int{5000, 20000}))
	require.Equal(t, "20000 users over 100 activities instead of 20000 users over 300 activities (a smaller run)",
		sizeNote("%d users over %d activities", [2]int{20000, 20000}, [2]int{100, 300}))
	require.Equal(t, 16, QuickSizes.DoorDevices, "the quick door has make bench's devices")
	require.NoError(t, ValidateDoorDevices(MinDoorDevices))
	require.NoError(t, ValidateDoorDevices(MaxDoorDevices))
	require.Error(t, ValidateDoorDevices(MaxDoorDevices+1))
	report, err := Run(t.Context(), Config{Sizes: Sizes{DoorDevices: 1}})
	require.ErrorContains(t, err, "not 1", "one device cannot scan a ticket a second time at another")
	require.Nil(t, report)
	require.Equal(t, "10000 tickets at 64 devices instead of 10000 tickets at 16 devices (a larger run)",
		sizeNote("%d tickets at %d devices", [2]int{10000, 10000}, [2]int{64, 16}))
	require.Equal(t, "200 tickets at 64 devices instead of 10000 tickets at 16 devices (another shape)",
		sizeNote("%d tickets at %d devices", [2]int{200, 10000}, [2]int{64, 16}))
}
