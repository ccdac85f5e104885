package loadtest

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

func TestPickParties(t *testing.T) {
	t.Parallel()
	parties := pickParties(rand.New(rand.NewPCG(3, 4)), 4000)
	counts := make([]int, groupMaxParty+1)
	for _, p := range parties {
		require.GreaterOrEqual(t, p, 1)
		require.LessOrEqual(t, p, groupMaxParty)
		counts[p]++
	}
	for p := 1; p <= groupMaxParty; p++ {
		require.InDelta(t, 1000, counts[p], 150, "a party of %d about a quarter of the time", p)
	}
	require.Equal(t, parties, pickParties(rand.New(rand.NewPCG(3, 4)), 4000), "the same seed picks the same")
}

func seatedWith(seats int) client.SignupResult {
	return client.SignupResult{Registration: client.Registration{Seats: seats}}
}

func TestGroupRunJudge(t *testing.T) {
	t.Parallel()
	r := newGroupRun(4)
	full := &client.Error{Status: http.StatusConflict, Code: client.CodeActivityFull}
	// Activity 0 (5 seats): 3 + 2 seated, then a party of 1 refused:
	// exact, and nothing was left for it.
	require.NoError(t, r.record(0, 3, seatedWith(3), nil))
	require.NoError(t, r.record(0, 2, seatedWith(2), nil))
	require.NoError(t, r.record(0, 1, client.SignupResult{}, full))
	// Activity 1: 4 seated, then parties of 3 and 1 refused; 1 seat is
	// left at the end, so the party of 1 fitted.
	require.NoError(t, r.record(1, 4, seatedWith(4), nil))
	require.NoError(t, r.record(1, 3, client.SignupResult{}, full))
	require.NoError(t, r.record(1, 1, client.SignupResult{}, full))
	require.NoError(t, r.record(1, 2, client.SignupResult{}, full))
	// Activity 2: 2 seats answered, the authority says 3.
	require.NoError(t, r.record(2, 2, seatedWith(2), nil))
	// Activity 3: seated with other seats than asked fails, and counts
	// what the answer said; a 503 and a waitlisting fail.
	require.ErrorContains(t, r.record(3, 2, seatedWith(1), nil), "admitted with 1 seats, asked for 2")
	require.Error(t, r.record(3, 1, client.SignupResult{}, &client.Error{Status: http.StatusServiceUnavailable}))
	require.Error(t, r.record(3, 1, client.SignupResult{Waitlisted: true}, nil))

	inexact, refusedFitting, refusedNotFull := r.judge([]int{5, 4, 3, 1}, 5)
	require.EqualValues(t, 1, inexact, "activity 2")
	require.EqualValues(t, 1, refusedFitting, "activity 1 refused a party of 1 with 1 seat left")
	require.EqualValues(t, 1, refusedNotFull, "activity 1")
	require.EqualValues(t, 1, r.smallestRefused[1].Load())
	require.Zero(t, r.smallestRefused[2].Load(), "refused no one")
	require.EqualValues(t, 4, r.full.Load())
	require.EqualValues(t, 5+4+2+1, r.seats.Load())
	require.EqualValues(t, 5, r.answers.count(http.StatusCreated))
	require.EqualValues(t, 1, r.answers.fivexx())

	inexact, refusedFitting, refusedNotFull = r.judge([]int{5, 4, 2, 1}, 4)
	require.EqualValues(t, 1, inexact, "activity 0 is over a capacity of 4, though its taken is what its answers say")
	require.Zero(t, refusedFitting)
	require.Zero(t, refusedNotFull)

	// A party of 2 refused with 1 seat left: rightly, and not full.
	r = newGroupRun(1)
	require.NoError(t, r.record(0, 4, seatedWith(4), nil))
	require.NoError(t, r.record(0, 2, client.SignupResult{}, full))
	inexact, refusedFitting, refusedNotFull = r.judge([]int{4}, 5)
	require.Zero(t, inexact)
	require.Zero(t, refusedFitting)
	require.EqualValues(t, 1, refusedNotFull)
}

// TestGroupRush runs a small group_rush against an instance in the test
// process: 200 users over 30 activities, 600 parties asking for about
// 1,500 seats of 1,500, so that activities fill with parties refused and
// some keep a seat or more that the parties refused were too large for.
// Every answer is 201 or 409, and every activity is exact and refused no
// party that fitted.
func TestGroupRush(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst := apptest.Start(t, apptest.Options{})
	api, err := NewAPI(inst.URL)
	require.NoError(t, err)
	t.Cleanup(api.Close)
	auth, err := httpapi.NewAuthenticator([]byte(apptest.Secret))
	require.NoError(t, err)
	var log bytes.Buffer
	b := &bench{
		cfg:    Config{Sizes: Sizes{GroupActivities: 30, GroupUsers: 200}}.withDefaults(),
		report: NewReport("test"), log: &log, auth: auth, api: api, nonce: randomHex(4),
		admin: inst.Token(t, "loadtest-admin", true),
	}
	require.NoError(t, b.groupRush(ctx), log.String())

	res := b.report.Scenarios[ScenarioGroupRush]
	require.EqualValues(t, 600, res.Ops, log.String())
	require.Zero(t, res.Errors, log.String())
	require.Contains(t, res.Note, "200 users over 30 activities instead of 20000 users over 300 activities")
	ch := b.report.Checks
	require.EqualValues(t, 30, ch[CheckGroupActivities])
	require.Zero(t, ch[CheckGroupInexact], log.String())
	require.Zero(t, ch[CheckGroupRefusedFitting], log.String())
	require.Zero(t, ch[CheckGroup5xx], log.String())
	require.EqualValues(t, 600, ch[CheckGroupAdmitted].(int64)+ch[CheckGroupFull].(int64), "every party seated or refused")
	require.Positive(t, ch[CheckGroupFull], "more seats asked than there are")
	require.Greater(t, ch[CheckGroupSeats], ch[CheckGroupAdmitted], "parties of more than one seat were seated")
	require.LessOrEqual(t, ch[CheckGroupSeats], int64(30*courseSeats))
	t.Log(log.String())
}
