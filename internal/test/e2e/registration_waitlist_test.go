package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/registration"
)

// getReg reads a registration as an admin.
func getReg(t *testing.T, inst *apptest.Instance, id string) client.Registration {
	t.Helper()
	r, err := inst.API(t, "admin", true).GetRegistration(t.Context(), id)
	require.NoError(t, err)
	return r
}

func position(r client.Registration) int {
	if r.WaitlistPosition == nil {
		return 0
	}
	return *r.WaitlistPosition
}

func TestWaitingListPromotesTheFirstInLineAtOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateWaitlisted(t, "waiting", 3)
	admin := inst.API(t, "admin", true)
	var seated, waiting []client.Registration
	for i := range 3 {
		seated = append(seated, inst.MustSignup(t, id, fmt.Sprint("s", i)))
		require.Nil(t, seated[i].WaitlistPosition)
	}
	for i := range 5 {
		res, err := inst.Signup(t, id, fmt.Sprint("w", i))
		require.NoError(t, err)
		require.True(t, res.Waitlisted, "%+v", res.Registration)
		w := res.Registration
		require.Equal(t, client.Waitlisted, w.Status)
		require.Equal(t, i+1, position(w))
		waiting = append(waiting, w)
	}
	act, err := inst.Public().GetActivity(ctx, id)
	require.NoError(t, err)
	require.Equal(t, [3]int{3, 0, 5}, [3]int{act.Taken, act.Remaining, act.Waiting})
	seats, err := inst.Public().Seats(ctx, id)
	require.NoError(t, err)
	require.Equal(t, [3]int{3, 0, 5}, [3]int{seats.Taken, seats.Remaining, seats.Waiting})

	// One seat freed: the first in line has it when the cancel is answered.
	// Sent as it is, to read its X-Request-Id.
	r := inst.MustDo(t, http.MethodPost, "/v1/registrations/"+seated[1].ID+"/cancel", inst.Token(t, "s1", false), nil)
	require.Equal(t, http.StatusOK, r.Status)
	first := getReg(t, inst, waiting[0].ID)
	require.Equal(t, client.Pending, first.Status)
	require.Nil(t, first.WaitlistPosition)
	for i, w := range waiting[1:] {
		require.Equal(t, i+1, position(getReg(t, inst, w.ID)), "the others moved up one")
	}
	evs, err := inst.API(t, "w0", false).RegistrationEvents(ctx, waiting[0].ID)
	require.NoError(t, err)
	require.Equal(t, []registration.EventType{registration.EventWaitlisted, registration.EventPromoted},
		[]registration.EventType{registration.EventType(evs[0].Type), registration.EventType(evs[1].Type)})
	require.Equal(t, registration.ActorSystem, evs[1].Actor)
	require.Equal(t, r.Header.Get("X-Request-Id"), requestID(evs[1]), "promoted by the cancel's request")

	// Cancelling a place in line leaves the line; an admin cannot skip it.
	_, err = inst.API(t, "w2", false).CancelRegistration(ctx, waiting[2].ID)
	require.NoError(t, err)
	require.Equal(t, 2, position(getReg(t, inst, waiting[3].ID)))
	for _, to := range []client.Status{client.Approved, client.AwaitingPayment} {
		_, err := admin.SetRegistrationStatus(ctx, waiting[1].ID, to)
		require.Equal(t, client.CodeInvalidTransition, apptest.Refusal(t, err).Code)
	}
	_, err = inst.Signup(t, id, "w1")
	require.Equal(t, client.CodeAlreadyRegistered, apptest.Refusal(t, err).Code, "a user waits once")

	// Turned off, the list takes nobody new but still promotes its own.
	_, err = admin.UpdateActivity(ctx, id, client.ActivityPatch{Waitlist: new(false)})
	require.NoError(t, err)
	_, err = inst.Signup(t, id, "newcomer")
	require.Equal(t, client.CodeActivityFull, apptest.Refusal(t, err).Code)
	_, err = inst.API(t, "s0", false).CancelRegistration(ctx, seated[0].ID)
	require.NoError(t, err)
	require.Equal(t, client.Pending, getReg(t, inst, waiting[1].ID).Status)

	// A capacity raise admits the rest at once.
	act, err = admin.UpdateActivity(ctx, id, client.ActivityPatch{Capacity: new(10)})
	require.NoError(t, err)
	require.Equal(t, [2]int{5, 0}, [2]int{act.Taken, act.Waiting})
	require.Equal(t, client.Pending, getReg(t, inst, waiting[4].ID).Status)
}

// TestReplayedWaitlistingReturnsTheFirst202 sends the replayed signups as
// they are: it compares the answers and reads Idempotent-Replayed.
func TestReplayedWaitlistingReturnsTheFirst202(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateWaitlisted(t, "replay", 1)
	inst.MustSignup(t, id, "seated")
	waiter := inst.Token(t, "waiter", false)
	path := "/v1/activities/" + id + "/registrations"
	first := inst.MustDo(t, http.MethodPost, path, waiter, "{}", "Idempotency-Key", "k1")
	require.Equal(t, http.StatusAccepted, first.Status)
	again := inst.MustDo(t, http.MethodPost, path, waiter, "{}", "Idempotency-Key", "k1")
	require.Equal(t, http.StatusAccepted, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.JSONEq(t, string(first.Body), string(again.Body))
	page, err := inst.API(t, "admin", true).ListRegistrations(t.Context(), id, client.RegistrationListOptions{Status: client.Waitlisted})
	require.NoError(t, err)
	require.Len(t, page.Items, 1, "one row")
}

// TestFreedSeatsGoToTheLineNotToNewcomers: a full 10-seat activity with 20
// waiting; concurrently 10 holders cancel while 50 newcomers sign up on
// two instances. The 10 promoted are the first 10 in line, every newcomer
// waits behind, and the activity is exactly full.
func TestFreedSeatsGoToTheLineNotToNewcomers(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	id := a.CreateWaitlisted(t, "no queue jumping", 10)
	var holders, line []client.Registration
	for i := range 10 {
		holders = append(holders, a.MustSignup(t, id, fmt.Sprint("h", i)))
	}
	for i := range 20 {
		res, err := b.Signup(t, id, fmt.Sprint("l", i))
		require.NoError(t, err)
		require.True(t, res.Waitlisted, "%+v", res.Registration)
		line = append(line, res.Registration)
	}

	var wg sync.WaitGroup
	var newcomers sync.Map
	for i, h := range holders {
		owner := []*apptest.Instance{a, b}[i%2].API(t, h.UserID, false)
		wg.Go(func() {
			_, err := owner.CancelRegistration(t.Context(), h.ID)
			require.NoError(t, err)
		})
	}
	for i := range 50 {
		newcomer := []*apptest.Instance{a, b}[i%2].API(t, fmt.Sprint("n", i), false)
		wg.Go(func() {
			res, err := newcomer.Signup(t.Context(), id, client.SignupOptions{})
			require.NoError(t, err, "newcomer %d", i)
			require.True(t, res.Waitlisted, "newcomer %d: %+v", i, res.Registration)
			newcomers.Store(res.Registration.ID, true)
		})
	}
	wg.Wait()

	for i, l := range line {
		want := client.Pending
		if i >= 10 {
			want = client.Waitlisted
		}
		got := getReg(t, a, l.ID)
		require.Equal(t, want, got.Status, "line %d", i)
		if i >= 10 {
			require.Equal(t, i-9, position(got), "line %d moved up ten", i)
		}
	}
	newcomers.Range(func(k, _ any) bool {
		got := getReg(t, a, k.(string))
		require.Equal(t, client.Waitlisted, got.Status)
		require.Greater(t, position(got), 10, "behind the ten still in line")
		return true
	})
	act, err := a.Public().GetActivity(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, 10, act.Taken)
	require.Equal(t, 60, act.Waiting)
}

// TestWaitlistFlashCrowd: 20,000 users for 500 seats with the list on
// (two instances): 500 seats, 19,500 places in line with distinct
// positions, no 5xx.
func TestWaitlistFlashCrowd(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	id := a.CreateWaitlisted(t, "flash crowd", 500)
	const users = 20000
	var seated atomic.Int64
	positions := make([]int, 0, users)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 128)
	for i := range users {
		api := []*apptest.Instance{a, b}[i%2].API(t, fmt.Sprint("f", i), false)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res, err := api.Signup(t.Context(), id, client.SignupOptions{})
			switch {
			case err == nil && !res.Waitlisted:
				seated.Add(1)
			case err == nil:
				p := position(res.Registration)
				mu.Lock()
				positions = append(positions, p)
				mu.Unlock()
			default:
				t.Errorf("unexpected %v", err)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 500, seated.Load())
	require.Len(t, positions, users-500)
	seen := make(map[int]bool, len(positions))
	for _, p := range positions {
		require.False(t, seen[p], "position %d given twice", p)
		require.True(t, p >= 1 && p <= users-500, "position %d out of range", p)
		seen[p] = true
	}
	act, err := a.Public().GetActivity(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, [2]int{500, users - 500}, [2]int{act.Taken, act.Waiting})
}
