package registration_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/apptest"
	"github.com/physiciansnet/capacityd/registration"
)

func eventsOf(t *testing.T, r apptest.Response) []registration.Event {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var body struct{ Items []registration.Event }
	r.JSON(t, &body)
	return body.Items
}

func feed(t *testing.T, inst *apptest.Instance, activityID, query string) registration.EventPage {
	t.Helper()
	r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+activityID+"/events?"+query, inst.Token(t, "root", true), nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var p registration.EventPage
	r.JSON(t, &p)
	return p
}

func TestARegistrationsEventsAreItsHistory(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "history", 5)
	alice := inst.Token(t, "alice", false)
	admin := inst.Token(t, "root", true)

	r := signup(t, inst, id, "alice")
	reg := regOf(t, r)
	requests := []string{r.Header.Get("X-Request-Id")}
	for _, to := range []string{"awaiting_payment", "approved"} {
		r = setStatus(t, inst, reg.ID, to)
		require.Equal(t, http.StatusOK, r.Status)
		requests = append(requests, r.Header.Get("X-Request-Id"))
	}
	r = inst.MustDo(t, http.MethodPost, "/v1/registrations/"+reg.ID+"/cancel", alice, nil)
	requests = append(requests, r.Header.Get("X-Request-Id"))
	inst.MustDo(t, http.MethodPost, "/v1/registrations/"+reg.ID+"/cancel", alice, nil) // changes nothing

	evs := eventsOf(t, inst.MustDo(t, http.MethodGet, "/v1/registrations/"+reg.ID+"/events", alice, nil))
	require.Len(t, evs, 4, "a second cancel records nothing")
	type row struct {
		Type     registration.EventType
		From, To string
		Actor    string
	}
	var got []row
	for i, e := range evs {
		from := ""
		if e.From != nil {
			from = string(*e.From)
		}
		got = append(got, row{e.Type, from, string(e.To), e.Actor})
		require.Equal(t, int64(i+1), e.Seq)
		require.Equal(t, registration.EventID(id, e.Seq), e.ID)
		require.Equal(t, id, e.ActivityID)
		require.Equal(t, reg.ID, e.RegistrationID)
		require.Equal(t, "alice", e.UserID)
		require.NotEmpty(t, requests[i])
		require.Equal(t, requests[i], e.RequestID, "the request that made the change")
		require.WithinDuration(t, time.Now(), e.At, time.Minute)
	}
	require.Equal(t, []row{
		{registration.EventCreated, "", "pending", "user:alice"},
		{registration.EventStatusChanged, "pending", "awaiting_payment", "admin:admin"},
		{registration.EventStatusChanged, "awaiting_payment", "approved", "admin:admin"},
		{registration.EventCancelled, "approved", "cancelled", "user:alice"},
	}, got)

	require.Len(t, eventsOf(t, inst.MustDo(t, http.MethodGet, "/v1/registrations/"+reg.ID+"/events", admin, nil)), 4)
	r = inst.MustDo(t, http.MethodGet, "/v1/registrations/"+reg.ID+"/events", inst.Token(t, "bob", false), nil)
	require.Equal(t, http.StatusNotFound, r.Status, "another user's registration reads as not found")
	require.Equal(t, "not_found", r.ErrorCode())
}

func TestActivityFeedPagesAndLongPollsAcrossInstances(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	id := a.CreateActivity(t, "feed", 10)
	for i := range 5 {
		require.Equal(t, http.StatusCreated, signup(t, a, id, fmt.Sprint("u", i)).Status)
	}

	p := feed(t, a, id, "limit=2")
	require.Equal(t, []int64{1, 2}, seqs(p.Items))
	require.Equal(t, int64(2), p.NextAfter)
	p = feed(t, a, id, fmt.Sprintf("after=%d&limit=2", p.NextAfter))
	require.Equal(t, []int64{3, 4}, seqs(p.Items))
	p = feed(t, a, id, fmt.Sprintf("after=%d", p.NextAfter))
	require.Equal(t, []int64{5}, seqs(p.Items))
	p = feed(t, a, id, "after=5")
	require.Empty(t, p.Items)
	require.Equal(t, int64(5), p.NextAfter, "an empty page keeps the position")

	// A long poll on a returns within a second of a change made on b.
	type polled struct {
		page registration.EventPage
		at   time.Time
	}
	done := make(chan polled)
	go func() { done <- polled{feed(t, a, id, "after=5&wait=20"), time.Now()} }()
	time.Sleep(300 * time.Millisecond) // the poll is waiting
	select {
	case <-done:
		t.Fatal("the long poll returned before any change")
	default:
	}
	require.Equal(t, http.StatusCreated, signup(t, b, id, "late").Status)
	changed := time.Now()
	select {
	case got := <-done:
		require.Equal(t, []int64{6}, seqs(got.page.Items))
		require.Less(t, got.at.Sub(changed), time.Second, "woken by the other instance's announcement")
		t.Logf("long poll answered %s after the change on the other instance", got.at.Sub(changed))
	case <-time.After(5 * time.Second):
		t.Fatal("the long poll did not return after a change on the other instance")
	}

	start := time.Now()
	p = feed(t, a, id, "after=6&wait=1")
	require.Empty(t, p.Items)
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "an empty long poll waits")

	r := a.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/events", a.Token(t, "u1", false), nil)
	require.Equal(t, http.StatusForbidden, r.Status)
	for _, q := range []string{"after=-1", "after=x", "limit=0", "limit=501", "wait=31", "wait=-1"} {
		r := a.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/events?"+q, a.Token(t, "root", true), nil)
		require.Equal(t, http.StatusBadRequest, r.Status, q)
		require.Equal(t, "invalid_request", r.ErrorCode(), q)
	}
	r = a.MustDo(t, http.MethodGet, "/v1/activities/a_01AAAAAAAAAAAAAAAAAAAAAAAA/events", a.Token(t, "root", true), nil)
	require.Equal(t, http.StatusNotFound, r.Status)
}

func seqs(evs []registration.Event) []int64 {
	out := []int64{}
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

func TestMyRegistrationsPageNewestFirst(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	var want []string
	for i := range 5 {
		id := inst.CreateActivity(t, fmt.Sprint("mine ", i), 3)
		want = append([]string{regOf(t, signup(t, inst, id, "me")).ID}, want...)
		signup(t, inst, id, "someone else")
	}
	tok := inst.Token(t, "me", false)
	var got []string
	path := "/v1/me/registrations?limit=2"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		r := inst.MustDo(t, http.MethodGet, path, tok, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var page registration.Page
		r.JSON(t, &page)
		for _, it := range page.Items {
			require.Equal(t, "me", it.UserID)
			got = append(got, it.ID)
		}
		if page.NextCursor == nil {
			break
		}
		path = "/v1/me/registrations?limit=2&cursor=" + *page.NextCursor
	}
	require.Equal(t, want, got)
	require.Equal(t, http.StatusUnauthorized, inst.MustDo(t, http.MethodGet, "/v1/me/registrations", "", nil).Status)
	require.Equal(t, http.StatusBadRequest, inst.MustDo(t, http.MethodGet, "/v1/me/registrations?limit=0", tok, nil).Status)
}
