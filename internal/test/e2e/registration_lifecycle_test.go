package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/registration"
)

func appWithTTL(ttl time.Duration) app.Options { return app.Options{Seats: capacity.Config{TTL: ttl}} }

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

func TestCancelTwiceFreesOneSeat(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "cancel", 2)
	a := inst.MustSignup(t, id, "a")
	inst.MustSignup(t, id, "b")
	require.Equal(t, http.StatusConflict, apptest.SignupStatus(inst.Signup(t, id, "c")))

	alice := inst.API(t, "a", false)
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = alice.CancelRegistration(ctx, a.ID)
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	cancelled, err := alice.CancelRegistration(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, client.Cancelled, cancelled.Status)
	require.Equal(t, 1, inst.AuthorityTaken(t, id))
	require.Equal(t, 1, displayTaken(t, inst, id), "one seat freed, not ten")

	c := inst.MustSignup(t, id, "c")
	require.Equal(t, http.StatusConflict, apptest.SignupStatus(inst.Signup(t, id, "d")))

	// A user whose registration was cancelled may sign up again.
	_, err = inst.API(t, "c", false).CancelRegistration(ctx, c.ID)
	require.NoError(t, err)
	again := inst.MustSignup(t, id, "a")
	require.NotEqual(t, a.ID, again.ID)
	require.Equal(t, 2, inst.AuthorityTaken(t, id))
}

func TestOthersRegistrationsReadAsNotFound(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "owners", 5)
	a := inst.MustSignup(t, id, "alice")

	bob := inst.API(t, "bob", false)
	_, err := bob.GetRegistration(ctx, a.ID)
	refusal := apptest.Refusal(t, err)
	require.Equal(t, http.StatusNotFound, refusal.Status)
	require.Equal(t, client.CodeNotFound, refusal.Code)
	_, err = bob.CancelRegistration(ctx, a.ID)
	require.Equal(t, http.StatusNotFound, apptest.Refusal(t, err).Status)
	require.Equal(t, 1, inst.AuthorityTaken(t, id))

	_, err = inst.API(t, "alice", false).GetRegistration(ctx, a.ID)
	require.NoError(t, err)
	_, err = inst.API(t, "root", true).GetRegistration(ctx, a.ID)
	require.NoError(t, err)
	_, err = inst.API(t, "admin", true).SetRegistrationStatus(ctx, a.ID, client.Approved)
	require.NoError(t, err)
	_, err = bob.SetRegistrationStatus(ctx, a.ID, client.Approved)
	require.Equal(t, http.StatusForbidden, apptest.Refusal(t, err).Status)
}

func TestLoweringCapacityBelowTakenEvictsNobody(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "shrink", 5)
	var regs []client.Registration
	for i := range 4 {
		regs = append(regs, inst.MustSignup(t, id, fmt.Sprint("u", i)))
	}
	admin := inst.API(t, "admin", true)
	a, err := admin.UpdateActivity(ctx, id, client.ActivityPatch{Capacity: new(2)})
	require.NoError(t, err)
	require.Equal(t, client.Activity{ID: id, Title: "shrink", Capacity: 2, HoldSeconds: 900,
		MaxSeatsPerRegistration: 1, WaitlistPolicy: "strict", Pools: []string{}, Taken: 4, Remaining: 0,
		CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}, a)

	_, err = inst.Signup(t, id, "late")
	require.Equal(t, client.CodeActivityFull, apptest.Refusal(t, err).Code)
	for _, reg := range regs[:2] {
		_, err := admin.CancelRegistration(ctx, reg.ID)
		require.NoError(t, err)
	}
	_, err = inst.Signup(t, id, "late")
	require.Equal(t, client.CodeActivityFull, apptest.Refusal(t, err).Code, "taken 2 of 2")
	_, err = admin.CancelRegistration(ctx, regs[2].ID)
	require.NoError(t, err)
	inst.MustSignup(t, id, "late")
	require.Equal(t, 2, inst.AuthorityTaken(t, id))

	seats, err := inst.Public().Seats(ctx, id)
	require.NoError(t, err)
	require.Equal(t, [3]int{2, 2, 0}, [3]int{seats.Capacity, seats.Taken, seats.Remaining})
}

func TestTransitionsAndExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := &fakeClock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	inst := apptest.Start(t, apptest.Options{App: app.Options{Now: clock.Now, ExpiryInterval: time.Hour}})
	admin := inst.API(t, "admin", true)
	act, err := admin.CreateActivity(ctx, client.NewActivity{Title: "paid", Capacity: 1, HoldSeconds: 60})
	require.NoError(t, err)
	id := act.ID
	// refused is the code of a status change the service refuses.
	refused := func(regID string, to client.Status) string {
		t.Helper()
		_, err := admin.SetRegistrationStatus(ctx, regID, to)
		return apptest.Refusal(t, err).Code
	}
	status := func(regID string) client.Status {
		t.Helper()
		reg, err := admin.GetRegistration(ctx, regID)
		require.NoError(t, err)
		return reg.Status
	}

	a := inst.MustSignup(t, id, "a")
	held, err := admin.SetRegistrationStatus(ctx, a.ID, client.AwaitingPayment)
	require.NoError(t, err)
	require.Equal(t, client.AwaitingPayment, held.Status)
	require.NotNil(t, held.ExpiresAt)
	require.Equal(t, clock.Now().Add(60*time.Second), *held.ExpiresAt)

	// Not allowed: back to awaiting_payment, to pending, to cancelled, garbage.
	require.Equal(t, client.CodeInvalidTransition, refused(a.ID, client.AwaitingPayment))
	require.Equal(t, client.CodeInvalidTransition, refused(a.ID, client.Pending))
	require.Equal(t, client.CodeInvalidTransition, refused(a.ID, client.Expired))
	require.Equal(t, client.CodeInvalidRequest, refused(a.ID, "paid"))

	// Not yet due.
	n, err := inst.App.Registrations.ExpireDue(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = inst.Signup(t, id, "b")
	require.Equal(t, client.CodeActivityFull, apptest.Refusal(t, err).Code)

	clock.Advance(61 * time.Second)
	n, err = inst.App.Registrations.ExpireDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, client.Expired, status(a.ID))
	require.Equal(t, 0, inst.AuthorityTaken(t, id))
	require.Equal(t, 0, displayTaken(t, inst, id), "expiry frees the seat in the display after the commit")

	// The freed seat is taken by b; a's late payment finds it full.
	b := inst.MustSignup(t, id, "b")
	require.Equal(t, client.CodeActivityFull, refused(a.ID, client.Approved))
	require.Equal(t, client.Expired, status(a.ID))
	require.Equal(t, 1, displayTaken(t, inst, id), "a refused re-admission gives its display hold back")

	// Once b cancels, a's late payment is admitted again.
	_, err = admin.CancelRegistration(ctx, b.ID)
	require.NoError(t, err)
	approved, err := admin.SetRegistrationStatus(ctx, a.ID, client.Approved)
	require.NoError(t, err)
	require.Equal(t, client.Approved, approved.Status)
	require.Nil(t, approved.ExpiresAt)
	require.Equal(t, 1, inst.AuthorityTaken(t, id))
	require.Equal(t, 1, displayTaken(t, inst, id))
	require.Equal(t, client.CodeInvalidTransition, refused(a.ID, client.AwaitingPayment))

	// pending → approved directly; cancelled → approved is refused.
	_, err = admin.CancelRegistration(ctx, a.ID)
	require.NoError(t, err)
	c := inst.MustSignup(t, id, "c")
	approved, err = admin.SetRegistrationStatus(ctx, c.ID, client.Approved)
	require.NoError(t, err)
	require.Equal(t, client.Approved, approved.Status)
	require.Equal(t, client.CodeInvalidTransition, refused(a.ID, client.Approved))
}

func TestListRegistrationsPagesInCreationOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "list", 100)
	var want []string
	for i := range 7 {
		want = append(want, inst.MustSignup(t, id, fmt.Sprint("u", i)).ID)
	}
	admin := inst.API(t, "admin", true)
	_, err := admin.CancelRegistration(ctx, want[3])
	require.NoError(t, err)

	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		page, err := admin.ListRegistrations(ctx, id, client.RegistrationListOptions{Limit: 3, Cursor: cursor})
		require.NoError(t, err)
		for _, it := range page.Items {
			got = append(got, it.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	require.Equal(t, want, got)

	page, err := admin.ListRegistrations(ctx, id, client.RegistrationListOptions{Status: client.Cancelled})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, want[3], page.Items[0].ID)
	require.Nil(t, page.NextCursor)

	// Bad queries, sent as they are: the client sends none of them.
	adminToken := inst.Token(t, "admin", true)
	for _, q := range []string{"limit=0", "limit=501", "limit=x", "cursor=%%%", "cursor=abc", "status=gone"} {
		r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/registrations?"+q, adminToken, nil)
		require.Equal(t, http.StatusBadRequest, r.Status, q)
		require.Equal(t, "invalid_request", r.ErrorCode(), q)
	}
	_, err = inst.API(t, "u1", false).ListRegistrations(ctx, id, client.RegistrationListOptions{})
	require.Equal(t, http.StatusForbidden, apptest.Refusal(t, err).Status)
}

// TestReadmissionOnAnotherInstanceIsSeenByAdmission checks that a seat taken
// back by expired → approved on one instance is counted by the admission
// batches of another, which may hold an upper bound of the activity's
// occupying registrations from before.
func TestReadmissionOnAnotherInstanceIsSeenByAdmission(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := &fakeClock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	opts := app.Options{Now: clock.Now, ExpiryInterval: time.Hour}
	// No display tier: its gate would hide an admission mistake.
	a := apptest.Start(t, apptest.Options{App: opts, NoRedis: true})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL, App: opts, NoRedis: true})
	id := a.CreateActivity(t, "readmit", 3)
	adminB := b.API(t, "admin", true)

	late := b.MustSignup(t, id, "late")
	_, err := adminB.SetRegistrationStatus(ctx, late.ID, client.AwaitingPayment)
	require.NoError(t, err)
	clock.Advance(time.Hour)
	_, err = b.App.Registrations.ExpireDue(ctx)
	require.NoError(t, err)

	a.MustSignup(t, id, "u1") // a now knows 1 taken
	_, err = adminB.SetRegistrationStatus(ctx, late.ID, client.Approved)
	require.NoError(t, err)
	require.Equal(t, 2, a.AuthorityTaken(t, id))

	created := 0
	for _, u := range []string{"u2", "u3", "u4"} {
		if apptest.SignupStatus(a.Signup(t, id, u)) == http.StatusCreated {
			created++
		}
	}
	require.Equal(t, 1, created)
	require.Equal(t, 3, a.AuthorityTaken(t, id))
}

func TestExpiringManyHoldsFreesEachSeatOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := &fakeClock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	inst := apptest.Start(t, apptest.Options{App: app.Options{Now: clock.Now, ExpiryInterval: time.Hour}})
	id := inst.CreateActivity(t, "many holds", 6)
	admin := inst.API(t, "admin", true)
	for i := range 5 {
		reg := inst.MustSignup(t, id, fmt.Sprint("h", i))
		if i < 4 {
			_, err := admin.SetRegistrationStatus(ctx, reg.ID, client.AwaitingPayment)
			require.NoError(t, err)
		}
	}
	require.Equal(t, 5, displayTaken(t, inst, id))

	clock.Advance(time.Hour)
	n, err := inst.App.Registrations.ExpireDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, 1, inst.AuthorityTaken(t, id))
	require.Equal(t, 1, displayTaken(t, inst, id), "four seats freed in one release")
}

// TestConcurrentLookupsEachGetTheirOwnAnswer: reads and cancellations of
// many registrations at once (their lookups share statements) each get
// their own registration; another user's or an unknown id is not_found.
func TestConcurrentLookupsEachGetTheirOwnAnswer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "lookups", 100)
	const users = 60
	regs := make([]client.Registration, users)
	for i := range regs {
		regs[i] = inst.MustSignup(t, id, fmt.Sprint("lookup-", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*users)
	for i, r := range regs {
		api := inst.API(t, r.UserID, false)
		wg.Go(func() {
			got, err := api.GetRegistration(ctx, r.ID)
			if err != nil || got.ID != r.ID || got.UserID != r.UserID {
				errs <- fmt.Errorf("own read of %s: %+v, %v", r.ID, got, err)
			}
		})
		wg.Go(func() {
			other := regs[(i+1)%users].ID
			if _, err := api.GetRegistration(ctx, other); !client.IsCode(err, client.CodeNotFound) {
				errs <- fmt.Errorf("read of another's %s: %v", other, err)
			}
		})
		wg.Go(func() {
			if _, err := api.GetRegistration(ctx, fmt.Sprintf("r_%026d", i)); !client.IsCode(err, client.CodeNotFound) {
				errs <- fmt.Errorf("read of an unknown id: %v", err)
			}
		})
		if i%2 == 0 {
			wg.Go(func() {
				got, err := api.CancelRegistration(ctx, r.ID)
				if err != nil || got.ID != r.ID || got.Status != client.Cancelled {
					errs <- fmt.Errorf("cancel of %s: %+v, %v", r.ID, got, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Equal(t, users/2, inst.AuthorityTaken(t, id))
}

// TestBlockExpiryEndsEveryDueBlockInOnePass: more blocks fall due at once
// than one claim takes; one pass of the expiry ends them all, and their
// seats are the public's again.
func TestBlockExpiryEndsEveryDueBlockInOnePass(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := &fakeClock{now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	inst := apptest.Start(t, apptest.Options{App: app.Options{Now: clock.Now, ExpiryInterval: time.Hour}})
	svc := inst.App.Registrations
	const n = 520
	id := inst.CreateActivity(t, "many blocks", n)
	until := clock.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := svc.CreateBlock(ctx, id, registration.NewBlock{Seats: 1, Code: fmt.Sprintf("CODE-%03d", i), ExpiresAt: &until},
				registration.Caller{UserID: "chief", Admin: true, RequestID: fmt.Sprintf("req-%d", i)})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	act, err := inst.API(t, "admin", true).GetActivity(ctx, id)
	require.NoError(t, err)
	require.Equal(t, [2]int{n, 0}, [2]int{act.Reserved, act.Remaining})

	clock.Advance(time.Minute + time.Second)
	ended, err := svc.ExpireDueBlocks(ctx)
	require.NoError(t, err)
	require.Equal(t, n, ended, "one pass ends every due block")
	act, err = inst.API(t, "admin", true).GetActivity(ctx, id)
	require.NoError(t, err)
	require.Equal(t, [2]int{0, n}, [2]int{act.Reserved, act.Remaining})
}
