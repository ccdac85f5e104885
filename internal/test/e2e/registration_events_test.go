package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/webhook"
)

// feed reads an activity's events as an admin.
func feed(t *testing.T, inst *apptest.Instance, activityID string, o client.EventFeedOptions) client.EventFeed {
	t.Helper()
	f, err := inst.API(t, "root", true).ActivityEvents(t.Context(), activityID, o)
	require.NoError(t, err)
	return f
}

// requestID is an event's request id, "" when it has none.
func requestID(e client.Event) string {
	if e.RequestID == nil {
		return ""
	}
	return *e.RequestID
}

func TestARegistrationsEventsAreItsHistory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "history", 5)
	aliceToken := inst.Token(t, "alice", false)
	adminToken := inst.Token(t, "admin", true)
	alice := inst.API(t, "alice", false)

	// The changes are sent as they are, to read each answer's X-Request-Id.
	r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", aliceToken, "{}")
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var reg client.Registration
	r.JSON(t, &reg)
	requests := []string{r.Header.Get("X-Request-Id")}
	for _, to := range []string{"awaiting_payment", "approved"} {
		r = inst.MustDo(t, http.MethodPost, "/v1/registrations/"+reg.ID+"/status", adminToken, map[string]string{"status": to})
		require.Equal(t, http.StatusOK, r.Status)
		requests = append(requests, r.Header.Get("X-Request-Id"))
	}
	r = inst.MustDo(t, http.MethodPost, "/v1/registrations/"+reg.ID+"/cancel", aliceToken, nil)
	requests = append(requests, r.Header.Get("X-Request-Id"))
	_, err := alice.CancelRegistration(ctx, reg.ID) // changes nothing
	require.NoError(t, err)

	evs, err := alice.RegistrationEvents(ctx, reg.ID)
	require.NoError(t, err)
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
		got = append(got, row{registration.EventType(e.Type), from, string(e.To), e.Actor})
		require.Equal(t, int64(i+1), e.Seq)
		require.Equal(t, registration.EventID(id, e.Seq), e.ID)
		require.Equal(t, id, e.ActivityID)
		require.Equal(t, reg.ID, e.RegistrationID)
		require.Equal(t, "alice", e.UserID)
		require.NotEmpty(t, requests[i])
		require.Equal(t, requests[i], requestID(e), "the request that made the change")
		require.WithinDuration(t, time.Now(), e.At, time.Minute)
	}
	require.Equal(t, []row{
		{registration.EventCreated, "", "pending", "user:alice"},
		{registration.EventStatusChanged, "pending", "awaiting_payment", "admin:admin"},
		{registration.EventStatusChanged, "awaiting_payment", "approved", "admin:admin"},
		{registration.EventCancelled, "approved", "cancelled", "user:alice"},
	}, got)

	evs, err = inst.API(t, "root", true).RegistrationEvents(ctx, reg.ID)
	require.NoError(t, err)
	require.Len(t, evs, 4)
	_, err = inst.API(t, "bob", false).RegistrationEvents(ctx, reg.ID)
	refusal := apptest.Refusal(t, err)
	require.Equal(t, http.StatusNotFound, refusal.Status, "another user's registration reads as not found")
	require.Equal(t, client.CodeNotFound, refusal.Code)
}

func TestActivityFeedPagesAndLongPollsAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// a's background work is put off, so that its statements are the
	// feed's alone: that tells when the long poll has read the feed.
	a := apptest.Start(t, apptest.Options{App: app.Options{
		ExpiryInterval:    time.Hour,
		ReconcileInterval: time.Hour,
		Webhooks:          webhook.DispatcherConfig{PollInterval: time.Hour, BacklogInterval: time.Hour},
		OnSale:            onsale.Options{Tick: time.Hour},
	}})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	id := a.CreateActivity(t, "feed", 10)
	for i := range 5 {
		a.MustSignup(t, id, fmt.Sprint("u", i))
	}

	p := feed(t, a, id, client.EventFeedOptions{Limit: 2})
	require.Equal(t, []int64{1, 2}, seqs(p.Items))
	require.Equal(t, int64(2), p.NextAfter)
	p = feed(t, a, id, client.EventFeedOptions{After: p.NextAfter, Limit: 2})
	require.Equal(t, []int64{3, 4}, seqs(p.Items))
	p = feed(t, a, id, client.EventFeedOptions{After: p.NextAfter})
	require.Equal(t, []int64{5}, seqs(p.Items))
	queries := a.Queries.Count()
	p = feed(t, a, id, client.EventFeedOptions{After: 5})
	perRead := a.Queries.Count() - queries // the statements of one read of the feed
	require.Positive(t, perRead)
	require.Empty(t, p.Items)
	require.Equal(t, int64(5), p.NextAfter, "an empty page keeps the position")

	// A long poll on a returns within a second of a change made on b.
	type polled struct {
		page client.EventFeed
		at   time.Time
	}
	done := make(chan polled)
	queries = a.Queries.Count()
	go func() { done <- polled{feed(t, a, id, client.EventFeedOptions{After: 5, WaitSeconds: 20}), time.Now()} }()
	// The poll has read the feed, found nothing, and waits.
	require.Eventually(t, func() bool { return a.Queries.Count() >= queries+perRead }, 10*time.Second, time.Millisecond,
		"the long poll reads the feed")
	select {
	case <-done:
		t.Fatal("the long poll returned before any change")
	default:
	}
	b.MustSignup(t, id, "late")
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
	p = feed(t, a, id, client.EventFeedOptions{After: 6, WaitSeconds: 1})
	require.Empty(t, p.Items)
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "an empty long poll waits")

	_, err := a.API(t, "u1", false).ActivityEvents(ctx, id, client.EventFeedOptions{})
	require.Equal(t, http.StatusForbidden, apptest.Refusal(t, err).Status)
	// Bad queries, sent as they are: the client sends none of them.
	for _, q := range []string{"after=-1", "after=x", "limit=0", "limit=501", "wait=31", "wait=-1"} {
		r := a.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/events?"+q, a.Token(t, "root", true), nil)
		require.Equal(t, http.StatusBadRequest, r.Status, q)
		require.Equal(t, "invalid_request", r.ErrorCode(), q)
	}
	_, err = a.API(t, "root", true).ActivityEvents(ctx, "a_01AAAAAAAAAAAAAAAAAAAAAAAA", client.EventFeedOptions{})
	require.Equal(t, http.StatusNotFound, apptest.Refusal(t, err).Status)
}

func seqs(evs []client.Event) []int64 {
	out := []int64{}
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

func TestMyRegistrationsPageNewestFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	var want []string
	for i := range 5 {
		id := inst.CreateActivity(t, fmt.Sprint("mine ", i), 3)
		want = append([]string{inst.MustSignup(t, id, "me").ID}, want...)
		inst.MustSignup(t, id, "someone else")
	}
	me := inst.API(t, "me", false)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		page, err := me.MyRegistrations(ctx, client.ListOptions{Limit: 2, Cursor: cursor})
		require.NoError(t, err)
		for _, it := range page.Items {
			require.Equal(t, "me", it.UserID)
			got = append(got, it.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	require.Equal(t, want, got)
	_, err := inst.Public().MyRegistrations(ctx, client.ListOptions{})
	require.Equal(t, http.StatusUnauthorized, apptest.Refusal(t, err).Status)
	// limit=0 sent as it is: the client sends no limit for 0.
	require.Equal(t, http.StatusBadRequest, inst.MustDo(t, http.MethodGet, "/v1/me/registrations?limit=0", inst.Token(t, "me", false), nil).Status)
}
