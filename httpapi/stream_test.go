package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/stream"
	"github.com/physiciansnet/capacityd/webhook"
)

// sseEvent is one server-sent event, or a comment when Comment is set.
type sseEvent struct {
	Event, ID, Data, Comment string
	At                       time.Time
}

func (e sseEvent) seats(t *testing.T) registration.Seats {
	t.Helper()
	var s registration.Seats
	require.NoError(t, json.Unmarshal([]byte(e.Data), &s), "data %q", e.Data)
	return s
}

// sseClient reads a seat stream; its events arrive on Events until the
// stream ends, when Events is closed.
type sseClient struct {
	Resp   *http.Response
	Events chan sseEvent
	cancel context.CancelFunc
}

// openStream opens the seat stream of the activity on inst and checks that
// it started; the stream is closed when t ends.
func openStream(t *testing.T, baseURL, activityID string, headers ...string) *sseClient {
	t.Helper()
	c, err := dialStream(baseURL, activityID, headers...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.Equal(t, http.StatusOK, c.Resp.StatusCode)
	return c
}

func dialStream(baseURL, activityID string, headers ...string) (*sseClient, error) {
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/v1/activities/"+activityID+"/seats/stream", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := streamClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	c := &sseClient{Resp: resp, Events: make(chan sseEvent, 1024), cancel: cancel}
	if resp.StatusCode != http.StatusOK {
		close(c.Events)
		return c, nil
	}
	go c.read()
	return c, nil
}

var streamClient = &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 100}}

func (c *sseClient) read() {
	defer close(c.Events)
	defer c.Resp.Body.Close()
	sc := bufio.NewScanner(c.Resp.Body)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Event != "" || ev.Data != "" {
				ev.At = time.Now()
				c.Events <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			c.Events <- sseEvent{Comment: strings.TrimSpace(line[1:]), At: time.Now()}
		case strings.HasPrefix(line, "event: "):
			ev.Event = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			ev.Data = line[len("data: "):]
		}
	}
}

// Close ends the stream.
func (c *sseClient) Close() {
	c.cancel()
	if c.Resp != nil {
		_ = c.Resp.Body.Close()
	}
}

// Next returns the next seats event, skipping comments.
func (c *sseClient) Next(t *testing.T, within time.Duration) sseEvent {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev, ok := <-c.Events:
			require.True(t, ok, "stream ended")
			if ev.Comment != "" {
				continue
			}
			require.Equal(t, "seats", ev.Event)
			return ev
		case <-deadline:
			t.Fatalf("no seats event within %s", within)
		}
	}
}

// NextTaken waits for a seats event showing taken.
func (c *sseClient) NextTaken(t *testing.T, taken int, within time.Duration) sseEvent {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ev := c.Next(t, time.Until(deadline))
		if ev.seats(t).Taken == taken {
			return ev
		}
	}
}

func TestSeatStreamSendsCurrentStateAtOnce(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "stream", 10)
	inst.MustSignup(t, id, "u1")

	c := openStream(t, inst.URL, id)
	require.Equal(t, "text/event-stream; charset=utf-8", c.Resp.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", c.Resp.Header.Get("Cache-Control"))
	ev := c.Next(t, time.Second)
	require.NotEmpty(t, ev.ID)
	s := ev.seats(t)
	require.Equal(t, registration.Seats{ActivityID: id, Capacity: 10, Taken: 1, Remaining: 9, Source: s.Source, AsOf: s.AsOf}, s)

	// A client resuming with Last-Event-ID gets the current state at once.
	inst.MustSignup(t, id, "u2")
	r := openStream(t, inst.URL, id, "Last-Event-ID", ev.ID)
	require.Equal(t, 2, r.Next(t, time.Second).seats(t).Taken)

	// Any origin may read the stream.
	o := openStream(t, inst.URL, id, "Origin", "https://elsewhere.example")
	require.Equal(t, "*", o.Resp.Header.Get("Access-Control-Allow-Origin"))
}

func TestSeatStreamUnknownActivityIsNotFound(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	for _, id := range []string{"a_01JD0000000000000000000000", "nope"} {
		r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/seats/stream", "", nil)
		require.Equal(t, http.StatusNotFound, r.Status, string(r.Body))
		require.Equal(t, "not_found", r.ErrorCode())
		require.Contains(t, r.Header.Get("Content-Type"), "application/json")
	}
}

func TestSeatStreamSignupOnAnotherInstanceArrivesWithinASecond(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	id := a.CreateActivity(t, "two instances", 50)
	c := openStream(t, a.URL, id)
	require.Equal(t, 0, c.Next(t, time.Second).seats(t).Taken)

	// The stream spaces its events 100 ms apart, so a signup right after
	// the previous event may wait that long: within the second all the same.
	for i := 1; i <= 3; i++ {
		start := time.Now()
		b.MustSignup(t, id, fmt.Sprintf("u%d", i))
		ev := c.NextTaken(t, i, time.Second)
		t.Logf("signup %d through the other instance reached the stream in %s", i, ev.At.Sub(start))
	}
}

func TestSeatStreamCoalescesABurst(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "burst", 500)
	c := openStream(t, inst.URL, id)
	require.Equal(t, 0, c.Next(t, time.Second).seats(t).Taken)

	users := make([]*client.Client, 200)
	for i := range users {
		users[i] = inst.API(t, fmt.Sprintf("u%d", i), false)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			res, err := users[i].Signup(t.Context(), id, client.SignupOptions{})
			if err == nil && res.Waitlisted {
				err = fmt.Errorf("waitlisted: %+v", res.Registration)
			}
			require.NoError(t, err)
		})
	}
	wg.Wait()
	burst := time.Since(start)

	var events []sseEvent
	deadline := time.After(time.Second)
collect:
	for {
		select {
		case ev := <-c.Events:
			if ev.Comment == "" {
				events = append(events, ev)
			}
		case <-deadline:
			break collect
		}
	}
	require.NotEmpty(t, events)
	require.Equal(t, 200, events[len(events)-1].seats(t).Taken, "the last event is exact")
	require.LessOrEqual(t, len(events), int(burst/(100*time.Millisecond))+2,
		"200 signups in %s gave %d events", burst, len(events))
	// The events leave at least 100 ms apart. They are timed on arrival,
	// where a busy test machine can delay one and so shorten the gap to the
	// next: over the whole stream, only the first and the last arrival
	// can shift the span, by less than one spacing.
	if n := len(events); n > 1 {
		span := events[n-1].At.Sub(events[0].At)
		require.GreaterOrEqual(t, span, time.Duration(n-2)*100*time.Millisecond,
			"%d events arrived within %s: not one per 100 ms", n, span)
	}
	t.Logf("200 signups in %s → %d events", burst, len(events))
}

func TestSeatStreamSlowClientDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "slow client", 100)

	// A client that sends its request and then never reads.
	conn, err := net.Dial("tcp", strings.TrimPrefix(inst.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = fmt.Fprintf(conn, "GET /v1/activities/%s/seats/stream HTTP/1.1\r\nHost: x\r\n\r\n", id)
	require.NoError(t, err)

	clients := make([]*sseClient, 5)
	for i := range clients {
		clients[i] = openStream(t, inst.URL, id)
		require.Equal(t, 0, clients[i].Next(t, time.Second).seats(t).Taken)
	}
	for i := 1; i <= 10; i++ {
		start := time.Now()
		inst.MustSignup(t, id, fmt.Sprintf("u%d", i))
		for _, c := range clients {
			ev := c.NextTaken(t, i, time.Second)
			require.Less(t, ev.At.Sub(start), time.Second)
		}
	}
}

func TestSeatStreamPings(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{HTTP: httpapi.Config{PingInterval: 50 * time.Millisecond}}})
	id := inst.CreateActivity(t, "ping", 1)
	c := openStream(t, inst.URL, id)
	c.Next(t, time.Second)
	pings := 0
	deadline := time.After(2 * time.Second)
	for pings < 3 {
		select {
		case ev := <-c.Events:
			if ev.Comment == "ping" {
				pings++
			}
		case <-deadline:
			t.Fatalf("%d pings in 2s at a 50ms interval", pings)
		}
	}
}

func TestSeatStreamsAreCappedPerInstance(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{Streams: stream.HubConfig{MaxStreams: 2}}})
	id := inst.CreateActivity(t, "cap", 1)
	openStream(t, inst.URL, id)
	openStream(t, inst.URL, id)
	r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/seats/stream", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, r.Status)
	require.Equal(t, "unavailable", r.ErrorCode())
	require.NotEmpty(t, r.Header.Get("Retry-After"))
}

// TestSeatStreamOutlivesServerTimeoutsAndEndsOnShutdown serves the app the
// way capacityd does: an http.Server with read and write timeouts shorter
// than the stream, and streams ended when shutdown starts.
func TestSeatStreamOutlivesServerTimeoutsAndEndsOnShutdown(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{HTTP: httpapi.Config{PingInterval: 100 * time.Millisecond}}})
	id := inst.CreateActivity(t, "shutdown", 5)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: inst.App.Server.Handler(), ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond}
	srv.RegisterOnShutdown(inst.App.Streams.Close)
	go func() { _ = srv.Serve(ln) }()

	c := openStream(t, "http://"+ln.Addr().String(), id)
	c.Next(t, time.Second)
	// The clock must pass both server timeouts (300 ms) with the stream
	// open: proves that neither ends it.
	time.Sleep(time.Second)
	inst.MustSignup(t, id, "u1")
	c.NextTaken(t, 1, time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, srv.Shutdown(ctx))
	require.Less(t, time.Since(start), 2*time.Second)
	for range c.Events { // the stream ends
	}
}

func TestSeatStreamsQueryNoPostgresWhileRedisIsUp(t *testing.T) {
	t.Parallel()
	// The instance's background work is put off, so that its statements
	// would be the streams' alone.
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		ExpiryInterval:     time.Hour,
		ReconcileInterval:  time.Hour,
		Webhooks:           webhook.DispatcherConfig{PollInterval: time.Hour, BacklogInterval: time.Hour},
		OnSale:             onsale.Options{Tick: time.Hour},
		KeyRefreshInterval: time.Hour,
	}})
	id := inst.CreateActivity(t, "quiet", 100)
	inst.MustSignup(t, id, "u0") // builds the display counter
	before := inst.Queries.Count()

	clients := make([]*sseClient, 20)
	for i := range clients {
		clients[i] = openStream(t, inst.URL, id)
		require.Equal(t, 1, clients[i].Next(t, time.Second).seats(t).Taken)
	}
	ctx := context.Background()
	for range 5 {
		// As another instance's signup would: a seat held, then announced.
		require.NoError(t, inst.App.Redis.HIncrBy(ctx, capacity.Key(id), "held", 1).Err())
		inst.App.Changes.Announce(ctx, id)
		for _, c := range clients {
			c.Next(t, time.Second)
		}
	}
	require.Equal(t, before, inst.Queries.Count(), "statements sent to PostgreSQL while only streams ran")
}

func TestSeatStreamWithoutRedisStillServesAndRefreshes(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{NoRedis: true, App: app.Options{Notifier: stream.NotifierConfig{RefreshInterval: 200 * time.Millisecond}}})
	id := inst.CreateActivity(t, "no redis", 3)
	c := openStream(t, inst.URL, id)
	ev := c.Next(t, time.Second)
	require.Equal(t, registration.SourceDatabase, ev.seats(t).Source)
	inst.MustSignup(t, id, "u1")
	c.NextTaken(t, 1, 2*time.Second)
}

func TestSeatStreamFollowsRedisOutages(t *testing.T) {
	t.Parallel()
	rs := testenv.PrivateRedis(t)
	inst := apptest.Start(t, apptest.Options{RedisURL: rs.URL(), App: app.Options{Notifier: stream.NotifierConfig{RefreshInterval: 200 * time.Millisecond}}})
	id := inst.CreateActivity(t, "redis outage", 10)
	c := openStream(t, inst.URL, id)
	require.Equal(t, 0, c.Next(t, time.Second).seats(t).Taken)

	rs.Kill()
	inst.MustSignup(t, id, "u1")
	ev := c.NextTaken(t, 1, 3*time.Second)
	require.Equal(t, registration.SourceDatabase, ev.seats(t).Source)

	rs.Start(t)
	require.Eventually(t, inst.App.Changes.Healthy, 10*time.Second, 20*time.Millisecond)
	// Wait for the display tier to be back too: while it still counts
	// Redis as failed, signups neither reserve in it nor announce changes.
	require.Eventually(t, func() bool {
		s, err := inst.Public().Seats(t.Context(), id)
		require.NoError(t, err)
		return s.Source == registration.SourceCache
	}, 10*time.Second, 50*time.Millisecond)
	inst.MustSignup(t, id, "u2")
	c.NextTaken(t, 2, 2*time.Second)
}
