package registration_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/apptest"
	"github.com/physiciansnet/capacityd/registration"
)

// createWaitlisted creates an activity with a waiting list.
func createWaitlisted(t *testing.T, inst *apptest.Instance, title string, capacity int) string {
	t.Helper()
	r := inst.MustDo(t, http.MethodPost, "/v1/activities", inst.Token(t, "admin", true),
		map[string]any{"title": title, "capacity": capacity, "waitlist": true})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var a registration.Activity
	r.JSON(t, &a)
	require.True(t, a.Waitlist)
	return a.ID
}

func getReg(t *testing.T, inst *apptest.Instance, id string) registration.Registration {
	t.Helper()
	r := inst.MustDo(t, http.MethodGet, "/v1/registrations/"+id, inst.Token(t, "admin", true), nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	return regOf(t, r)
}

func position(r registration.Registration) int {
	if r.WaitlistPosition == nil {
		return 0
	}
	return *r.WaitlistPosition
}

func TestWaitingListPromotesTheFirstInLineAtOnce(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := createWaitlisted(t, inst, "waiting", 3)
	var seated, waiting []registration.Registration
	for i := range 3 {
		r := signup(t, inst, id, fmt.Sprint("s", i))
		require.Equal(t, http.StatusCreated, r.Status)
		seated = append(seated, regOf(t, r))
		require.Nil(t, seated[i].WaitlistPosition)
	}
	for i := range 5 {
		r := signup(t, inst, id, fmt.Sprint("w", i))
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
		w := regOf(t, r)
		require.Equal(t, registration.Waitlisted, w.Status)
		require.Equal(t, i+1, position(w))
		waiting = append(waiting, w)
	}
	var act registration.Activity
	inst.MustDo(t, http.MethodGet, "/v1/activities/"+id, "", nil).JSON(t, &act)
	require.Equal(t, [3]int{3, 0, 5}, [3]int{act.Taken, act.Remaining, act.Waiting})
	var seats struct{ Taken, Remaining, Waiting int }
	inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/seats", "", nil).JSON(t, &seats)
	require.Equal(t, struct{ Taken, Remaining, Waiting int }{3, 0, 5}, seats)

	// One seat freed: the first in line has it when the cancel is answered.
	r := inst.MustDo(t, http.MethodPost, "/v1/registrations/"+seated[1].ID+"/cancel", inst.Token(t, "s1", false), nil)
	require.Equal(t, http.StatusOK, r.Status)
	first := getReg(t, inst, waiting[0].ID)
	require.Equal(t, registration.Pending, first.Status)
	require.Nil(t, first.WaitlistPosition)
	for i, w := range waiting[1:] {
		require.Equal(t, i+1, position(getReg(t, inst, w.ID)), "the others moved up one")
	}
	evs := eventsOf(t, inst.MustDo(t, http.MethodGet, "/v1/registrations/"+waiting[0].ID+"/events", inst.Token(t, "w0", false), nil))
	require.Equal(t, []registration.EventType{registration.EventWaitlisted, registration.EventPromoted}, []registration.EventType{evs[0].Type, evs[1].Type})
	require.Equal(t, registration.ActorSystem, evs[1].Actor)
	require.Equal(t, r.Header.Get("X-Request-Id"), evs[1].RequestID, "promoted by the cancel's request")

	// Cancelling a place in line leaves the line; an admin cannot skip it.
	require.Equal(t, http.StatusOK, inst.MustDo(t, http.MethodPost, "/v1/registrations/"+waiting[2].ID+"/cancel", inst.Token(t, "w2", false), nil).Status)
	require.Equal(t, 2, position(getReg(t, inst, waiting[3].ID)))
	for _, to := range []string{"approved", "awaiting_payment"} {
		require.Equal(t, "invalid_transition", setStatus(t, inst, waiting[1].ID, to).ErrorCode())
	}
	require.Equal(t, "already_registered", signup(t, inst, id, "w1").ErrorCode(), "a user waits once")

	// Turned off, the list takes nobody new but still promotes its own.
	off := inst.MustDo(t, http.MethodPatch, "/v1/activities/"+id, inst.Token(t, "admin", true), map[string]any{"waitlist": false})
	require.Equal(t, http.StatusOK, off.Status)
	require.Equal(t, "activity_full", signup(t, inst, id, "newcomer").ErrorCode())
	inst.MustDo(t, http.MethodPost, "/v1/registrations/"+seated[0].ID+"/cancel", inst.Token(t, "s0", false), nil)
	require.Equal(t, registration.Pending, getReg(t, inst, waiting[1].ID).Status)

	// A capacity raise admits the rest at once.
	raised := inst.MustDo(t, http.MethodPatch, "/v1/activities/"+id, inst.Token(t, "admin", true), map[string]any{"capacity": 10})
	require.Equal(t, http.StatusOK, raised.Status)
	raised.JSON(t, &act)
	require.Equal(t, [2]int{5, 0}, [2]int{act.Taken, act.Waiting})
	require.Equal(t, registration.Pending, getReg(t, inst, waiting[4].ID).Status)
}

func TestReplayedWaitlistingReturnsTheFirst202(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := createWaitlisted(t, inst, "replay", 1)
	require.Equal(t, http.StatusCreated, signup(t, inst, id, "seated").Status)
	first := signup(t, inst, id, "waiter", "Idempotency-Key", "k1")
	require.Equal(t, http.StatusAccepted, first.Status)
	again := signup(t, inst, id, "waiter", "Idempotency-Key", "k1")
	require.Equal(t, http.StatusAccepted, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.JSONEq(t, string(first.Body), string(again.Body))
	var page registration.Page
	inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/registrations?status=waitlisted", inst.Token(t, "admin", true), nil).JSON(t, &page)
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
	id := createWaitlisted(t, a, "no queue jumping", 10)
	var holders, line []registration.Registration
	for i := range 10 {
		holders = append(holders, regOf(t, signup(t, a, id, fmt.Sprint("h", i))))
	}
	for i := range 20 {
		r := signup(t, b, id, fmt.Sprint("l", i))
		require.Equal(t, http.StatusAccepted, r.Status)
		line = append(line, regOf(t, r))
	}

	var wg sync.WaitGroup
	var newcomers sync.Map
	for i, h := range holders {
		inst := []*apptest.Instance{a, b}[i%2]
		wg.Go(func() {
			r := inst.MustDo(t, http.MethodPost, "/v1/registrations/"+h.ID+"/cancel", inst.Token(t, h.UserID, false), nil)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		})
	}
	for i := range 50 {
		inst := []*apptest.Instance{a, b}[i%2]
		wg.Go(func() {
			r := signup(t, inst, id, fmt.Sprint("n", i))
			require.Equal(t, http.StatusAccepted, r.Status, "newcomer %d: %s", i, r.Body)
			newcomers.Store(regOf(t, r).ID, true)
		})
	}
	wg.Wait()

	for i, l := range line {
		want := registration.Pending
		if i >= 10 {
			want = registration.Waitlisted
		}
		got := getReg(t, a, l.ID)
		require.Equal(t, want, got.Status, "line %d", i)
		if i >= 10 {
			require.Equal(t, i-9, position(got), "line %d moved up ten", i)
		}
	}
	newcomers.Range(func(k, _ any) bool {
		got := getReg(t, a, k.(string))
		require.Equal(t, registration.Waitlisted, got.Status)
		require.Greater(t, position(got), 10, "behind the ten still in line")
		return true
	})
	var act registration.Activity
	a.MustDo(t, http.MethodGet, "/v1/activities/"+id, "", nil).JSON(t, &act)
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
	id := createWaitlisted(t, a, "flash crowd", 500)
	const users = 20000
	var seated atomic.Int64
	positions := make([]int, 0, users)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 128)
	for i := range users {
		inst := []*apptest.Instance{a, b}[i%2]
		tok := inst.Token(t, fmt.Sprint("f", i), false)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := apptest.Do(http.MethodPost, inst.URL+"/v1/activities/"+id+"/registrations", tok, "{}")
			require.NoError(t, err)
			switch r.Status {
			case http.StatusCreated:
				seated.Add(1)
			case http.StatusAccepted:
				p := position(regOf(t, r))
				mu.Lock()
				positions = append(positions, p)
				mu.Unlock()
			default:
				t.Errorf("unexpected %d %s", r.Status, r.Body)
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
	var act registration.Activity
	a.MustDo(t, http.MethodGet, "/v1/activities/"+id, "", nil).JSON(t, &act)
	require.Equal(t, [2]int{500, users - 500}, [2]int{act.Taken, act.Waiting})
}
