package registration_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/apptest"
	"github.com/physiciansnet/capacityd/registration"
)

func appWithTTL(ttl time.Duration) app.Options { return app.Options{SeatCacheTTL: ttl} }

// fakeClock is a settable clock for expiry.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func signup(t *testing.T, inst *apptest.Instance, activityID, user string, headers ...string) apptest.Response {
	t.Helper()
	return inst.MustDo(t, http.MethodPost, "/v1/activities/"+activityID+"/registrations", inst.Token(t, user, false), "{}", headers...)
}

func regOf(t *testing.T, r apptest.Response) registration.Registration {
	t.Helper()
	var reg registration.Registration
	r.JSON(t, &reg)
	return reg
}

func setStatus(t *testing.T, inst *apptest.Instance, regID, status string) apptest.Response {
	t.Helper()
	return inst.MustDo(t, http.MethodPost, "/v1/registrations/"+regID+"/status", inst.Token(t, "admin", true),
		map[string]string{"status": status})
}

func TestCancelTwiceFreesOneSeat(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "cancel", 2)
	a := regOf(t, signup(t, inst, id, "a"))
	signup(t, inst, id, "b")
	require.Equal(t, http.StatusConflict, signup(t, inst, id, "c").Status)

	tok := inst.Token(t, "a", false)
	var wg sync.WaitGroup
	statuses := make([]int, 10)
	for i := range statuses {
		wg.Go(func() {
			statuses[i] = inst.MustDo(t, http.MethodPost, "/v1/registrations/"+a.ID+"/cancel", tok, nil).Status
		})
	}
	wg.Wait()
	for _, s := range statuses {
		require.Equal(t, http.StatusOK, s)
	}
	r := inst.MustDo(t, http.MethodPost, "/v1/registrations/"+a.ID+"/cancel", tok, nil)
	require.Equal(t, registration.Cancelled, regOf(t, r).Status)
	require.Equal(t, 1, authorityTaken(t, inst, id))
	require.Equal(t, 1, displayTaken(t, inst, id), "one seat freed, not ten")

	c := regOf(t, signup(t, inst, id, "c"))
	require.Equal(t, http.StatusConflict, signup(t, inst, id, "d").Status)

	// A user whose registration was cancelled may sign up again.
	inst.MustDo(t, http.MethodPost, "/v1/registrations/"+c.ID+"/cancel", inst.Token(t, "c", false), nil)
	again := signup(t, inst, id, "a")
	require.Equal(t, http.StatusCreated, again.Status, string(again.Body))
	require.NotEqual(t, a.ID, regOf(t, again).ID)
	require.Equal(t, 2, authorityTaken(t, inst, id))
}

func TestOthersRegistrationsReadAsNotFound(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "owners", 5)
	a := regOf(t, signup(t, inst, id, "alice"))

	bob := inst.Token(t, "bob", false)
	r := inst.MustDo(t, http.MethodGet, "/v1/registrations/"+a.ID, bob, nil)
	require.Equal(t, http.StatusNotFound, r.Status)
	require.Equal(t, "not_found", r.ErrorCode())
	r = inst.MustDo(t, http.MethodPost, "/v1/registrations/"+a.ID+"/cancel", bob, nil)
	require.Equal(t, http.StatusNotFound, r.Status)
	require.Equal(t, 1, authorityTaken(t, inst, id))

	r = inst.MustDo(t, http.MethodGet, "/v1/registrations/"+a.ID, inst.Token(t, "alice", false), nil)
	require.Equal(t, http.StatusOK, r.Status)
	r = inst.MustDo(t, http.MethodGet, "/v1/registrations/"+a.ID, inst.Token(t, "root", true), nil)
	require.Equal(t, http.StatusOK, r.Status)
	r = setStatus(t, inst, a.ID, "approved")
	require.Equal(t, http.StatusOK, r.Status)
	r = inst.MustDo(t, http.MethodPost, "/v1/registrations/"+a.ID+"/status", bob, map[string]string{"status": "approved"})
	require.Equal(t, http.StatusForbidden, r.Status)
}

func TestLoweringCapacityBelowTakenEvictsNobody(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "shrink", 5)
	var regs []registration.Registration
	for i := range 4 {
		regs = append(regs, regOf(t, signup(t, inst, id, fmt.Sprint("u", i))))
	}
	admin := inst.Token(t, "admin", true)
	r := inst.MustDo(t, http.MethodPatch, "/v1/activities/"+id, admin, map[string]int{"capacity": 2})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	var a registration.Activity
	r.JSON(t, &a)
	require.Equal(t, registration.Activity{ID: id, Title: "shrink", Capacity: 2, HoldSeconds: 900, Taken: 4, Remaining: 0,
		CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}, a)

	require.Equal(t, "activity_full", signup(t, inst, id, "late").ErrorCode())
	for _, reg := range regs[:2] {
		inst.MustDo(t, http.MethodPost, "/v1/registrations/"+reg.ID+"/cancel", admin, nil)
	}
	require.Equal(t, "activity_full", signup(t, inst, id, "late").ErrorCode(), "taken 2 of 2")
	inst.MustDo(t, http.MethodPost, "/v1/registrations/"+regs[2].ID+"/cancel", admin, nil)
	require.Equal(t, http.StatusCreated, signup(t, inst, id, "late").Status)
	require.Equal(t, 2, authorityTaken(t, inst, id))

	var seats struct{ Capacity, Taken, Remaining int }
	inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/seats", "", nil).JSON(t, &seats)
	require.Equal(t, struct{ Capacity, Taken, Remaining int }{2, 2, 0}, seats)
}

func TestTransitionsAndExpiry(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	inst := apptest.Start(t, apptest.Options{App: app.Options{Now: clock.Now, ExpiryInterval: time.Hour}})
	admin := inst.Token(t, "admin", true)
	r := inst.MustDo(t, http.MethodPost, "/v1/activities", admin, map[string]any{"title": "paid", "capacity": 1, "hold_seconds": 60})
	require.Equal(t, http.StatusCreated, r.Status)
	var act registration.Activity
	r.JSON(t, &act)
	id := act.ID

	a := regOf(t, signup(t, inst, id, "a"))
	r = setStatus(t, inst, a.ID, "awaiting_payment")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	held := regOf(t, r)
	require.Equal(t, registration.AwaitingPayment, held.Status)
	require.NotNil(t, held.ExpiresAt)
	require.Equal(t, clock.Now().Add(60*time.Second), *held.ExpiresAt)

	// Not allowed: back to awaiting_payment, to pending, to cancelled, garbage.
	require.Equal(t, "invalid_transition", setStatus(t, inst, a.ID, "awaiting_payment").ErrorCode())
	require.Equal(t, "invalid_transition", setStatus(t, inst, a.ID, "pending").ErrorCode())
	require.Equal(t, "invalid_transition", setStatus(t, inst, a.ID, "expired").ErrorCode())
	require.Equal(t, "invalid_request", setStatus(t, inst, a.ID, "paid").ErrorCode())

	// Not yet due.
	n, err := inst.App.Registrations.ExpireDue(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, "activity_full", signup(t, inst, id, "b").ErrorCode())

	clock.Advance(61 * time.Second)
	n, err = inst.App.Registrations.ExpireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	r = inst.MustDo(t, http.MethodGet, "/v1/registrations/"+a.ID, admin, nil)
	require.Equal(t, registration.Expired, regOf(t, r).Status)
	require.Equal(t, 0, authorityTaken(t, inst, id))
	require.Equal(t, 0, displayTaken(t, inst, id), "expiry frees the seat in the display after the commit")

	// The freed seat is taken by b; a's late payment finds it full.
	b := regOf(t, signup(t, inst, id, "b"))
	require.Equal(t, "activity_full", setStatus(t, inst, a.ID, "approved").ErrorCode())
	require.Equal(t, registration.Expired, regOf(t, inst.MustDo(t, http.MethodGet, "/v1/registrations/"+a.ID, admin, nil)).Status)
	require.Equal(t, 1, displayTaken(t, inst, id), "a refused re-admission gives its display hold back")

	// Once b cancels, a's late payment is admitted again.
	inst.MustDo(t, http.MethodPost, "/v1/registrations/"+b.ID+"/cancel", admin, nil)
	r = setStatus(t, inst, a.ID, "approved")
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	approved := regOf(t, r)
	require.Equal(t, registration.Approved, approved.Status)
	require.Nil(t, approved.ExpiresAt)
	require.Equal(t, 1, authorityTaken(t, inst, id))
	require.Equal(t, 1, displayTaken(t, inst, id))
	require.Equal(t, "invalid_transition", setStatus(t, inst, a.ID, "awaiting_payment").ErrorCode())

	// pending → approved directly; cancelled → approved is refused.
	inst.MustDo(t, http.MethodPost, "/v1/registrations/"+a.ID+"/cancel", admin, nil)
	c := regOf(t, signup(t, inst, id, "c"))
	require.Equal(t, registration.Approved, regOf(t, setStatus(t, inst, c.ID, "approved")).Status)
	require.Equal(t, "invalid_transition", setStatus(t, inst, a.ID, "approved").ErrorCode())
}

func TestListRegistrationsPagesInCreationOrder(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "list", 100)
	var want []string
	for i := range 7 {
		want = append(want, regOf(t, signup(t, inst, id, fmt.Sprint("u", i))).ID)
	}
	admin := inst.Token(t, "admin", true)
	inst.MustDo(t, http.MethodPost, "/v1/registrations/"+want[3]+"/cancel", admin, nil)

	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		path := "/v1/activities/" + id + "/registrations?limit=3"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := inst.MustDo(t, http.MethodGet, path, admin, nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		var page registration.Page
		r.JSON(t, &page)
		for _, it := range page.Items {
			got = append(got, it.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	require.Equal(t, want, got)

	var page registration.Page
	inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/registrations?status=cancelled", admin, nil).JSON(t, &page)
	require.Len(t, page.Items, 1)
	require.Equal(t, want[3], page.Items[0].ID)
	require.Nil(t, page.NextCursor)

	for _, q := range []string{"limit=0", "limit=501", "limit=x", "cursor=%%%", "cursor=abc", "status=gone"} {
		r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/registrations?"+q, admin, nil)
		require.Equal(t, http.StatusBadRequest, r.Status, q)
		require.Equal(t, "invalid_request", r.ErrorCode(), q)
	}
	require.Equal(t, http.StatusForbidden, inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/registrations", inst.Token(t, "u1", false), nil).Status)
}

// TestReadmissionOnAnotherInstanceIsSeenByAdmission checks that a seat taken
// back by expired → approved on one instance is counted by the admission
// batches of another, which may hold an upper bound of the activity's
// occupying registrations from before.
func TestReadmissionOnAnotherInstanceIsSeenByAdmission(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	opts := app.Options{Now: clock.Now, ExpiryInterval: time.Hour}
	// No display tier: its gate would hide an admission mistake.
	a := apptest.Start(t, apptest.Options{App: opts, NoRedis: true})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL, App: opts, NoRedis: true})
	id := a.CreateActivity(t, "readmit", 3)

	late := regOf(t, signup(t, b, id, "late"))
	require.Equal(t, http.StatusOK, setStatus(t, b, late.ID, "awaiting_payment").Status)
	clock.Advance(time.Hour)
	_, err := b.App.Registrations.ExpireDue(context.Background())
	require.NoError(t, err)

	require.Equal(t, http.StatusCreated, signup(t, a, id, "u1").Status) // a now knows 1 taken
	require.Equal(t, http.StatusOK, setStatus(t, b, late.ID, "approved").Status)
	require.Equal(t, 2, authorityTaken(t, a, id))

	created := 0
	for _, u := range []string{"u2", "u3", "u4"} {
		if signup(t, a, id, u).Status == http.StatusCreated {
			created++
		}
	}
	require.Equal(t, 1, created)
	require.Equal(t, 3, authorityTaken(t, a, id))
}

func TestExpiringManyHoldsFreesEachSeatOnce(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	inst := apptest.Start(t, apptest.Options{App: app.Options{Now: clock.Now, ExpiryInterval: time.Hour}})
	id := inst.CreateActivity(t, "many holds", 6)
	for i := range 5 {
		reg := regOf(t, signup(t, inst, id, fmt.Sprint("h", i)))
		if i < 4 {
			require.Equal(t, http.StatusOK, setStatus(t, inst, reg.ID, "awaiting_payment").Status)
		}
	}
	require.Equal(t, 5, displayTaken(t, inst, id))

	clock.Advance(time.Hour)
	n, err := inst.App.Registrations.ExpireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, 1, authorityTaken(t, inst, id))
	require.Equal(t, 1, displayTaken(t, inst, id), "four seats freed in one release")
}
