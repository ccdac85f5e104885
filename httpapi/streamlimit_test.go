package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/stream"
)

// behindLoopbackProxy starts an instance, with o otherwise, that trusts
// the loopback as a reverse proxy: X-Forwarded-For then names the client
// address each of the test's requests comes from.
func behindLoopbackProxy(t *testing.T, o apptest.Options) *apptest.Instance {
	t.Helper()
	nets, err := httpapi.ParseTrustedProxies("127.0.0.0/8,::1")
	require.NoError(t, err)
	o.App.HTTP.TrustedProxies = nets
	return apptest.Start(t, o)
}

// cappedInstance starts an instance behind the loopback proxy with opts.
func cappedInstance(t *testing.T, opts app.Options) *apptest.Instance {
	t.Helper()
	return behindLoopbackProxy(t, apptest.Options{App: opts})
}

// checkedStreams opens streams through the API description check, without
// the shared client's time limit (a stream lasts as long as its test).
var checkedStreams = &http.Client{Transport: apptest.Client.Transport}

// bulkStreams opens streams without the check, for the test of thousands
// of attempts (whose refusals are the ones checkedStreams checks elsewhere).
var bulkStreams = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}

// attempt is the outcome of one try at a stream or long poll: an open
// stream (Status 200, Close ends it) or an answer read whole.
type attempt struct {
	apptest.Response
	Close func()
}

// tryStream asks for a seat stream of the activity as the client at addr.
// It may run on any goroutine: a failure is reported with t.Errorf.
func tryStream(t *testing.T, inst *apptest.Instance, activityID, addr string) attempt {
	t.Helper()
	return tryStreamWith(t, checkedStreams, inst, activityID, addr)
}

// tryStreamWith is tryStream over hc.
func tryStreamWith(t *testing.T, hc *http.Client, inst *apptest.Instance, activityID, addr string) attempt {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	a := attempt{Close: func() { once.Do(cancel) }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, inst.URL+"/v1/activities/"+activityID+"/seats/stream", nil)
	if err != nil {
		cancel()
		t.Errorf("stream from %s: %v", addr, err)
		return a
	}
	req.Header.Set("X-Forwarded-For", addr)
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		t.Errorf("stream from %s: %v", addr, err)
		return a
	}
	a.Status, a.Header = resp.StatusCode, resp.Header
	if resp.StatusCode != http.StatusOK {
		a.Body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil {
			t.Errorf("stream from %s: %v", addr, err)
		}
		return a
	}
	a.Close = func() { once.Do(func() { cancel(); resp.Body.Close() }) }
	t.Cleanup(a.Close)
	// The stream is live: it starts with its retry field.
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "retry: 2000\n" {
		t.Errorf("stream from %s starts with %q, %v", addr, line, err)
	}
	return a
}

// tryStreams asks for n seat streams as the client at addr, at most
// parallel at once, and returns the open ones and the refusals.
func tryStreams(t *testing.T, inst *apptest.Instance, activityID, addr string, n, parallel int) (open, refused []attempt) {
	t.Helper()
	return tryStreamsWith(t, checkedStreams, inst, activityID, addr, n, parallel)
}

// tryStreamsWith is tryStreams over hc.
func tryStreamsWith(t *testing.T, hc *http.Client, inst *apptest.Instance, activityID, addr string, n, parallel int) (open, refused []attempt) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			a := tryStreamWith(t, hc, inst, activityID, addr)
			mu.Lock()
			defer mu.Unlock()
			if a.Status == http.StatusOK {
				open = append(open, a)
			} else {
				refused = append(refused, a)
			}
		})
	}
	wg.Wait()
	return open, refused
}

// requireSlotRefusals checks that every refusal is the cap's 429.
func requireSlotRefusals(t *testing.T, refused []attempt) {
	t.Helper()
	for _, r := range refused {
		requireErrorShape(t, r.Response, http.StatusTooManyRequests, "rate_limited")
		require.Equal(t, "5", r.Header.Get("Retry-After"))
	}
}

// metric returns the value of the metric line that starts with series
// (name and labels), or "" when there is none.
func metric(t *testing.T, inst *apptest.Instance, series string) string {
	t.Helper()
	r := inst.MustDo(t, http.MethodGet, "/metrics", "", nil)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// requireSlotsGivenBack waits until no client holds a slot of limit.
func requireSlotsGivenBack(t *testing.T, inst *apptest.Instance, limit string) {
	t.Helper()
	series := `capacityd_rate_limit_clients{limit="` + limit + `"}`
	require.Eventually(t, func() bool { return metric(t, inst, series) == "0" }, 10*time.Second, 20*time.Millisecond,
		"%s still held", limit)
}

func closeAll(as []attempt) {
	for _, a := range as {
		a.Close()
	}
}

func TestSeatStreamsAreCappedPerAddress(t *testing.T) {
	t.Parallel()
	const perAddress = 4
	inst := cappedInstance(t, app.Options{HTTP: httpapi.Config{StreamsPerAddress: perAddress}})
	id := inst.CreateActivity(t, "per address", 10)

	// Asked for all at once, exactly the cap is served.
	open, refused := tryStreams(t, inst, id, "203.0.113.7", perAddress+6, perAddress+6)
	require.Len(t, open, perAddress)
	require.Len(t, refused, 6)
	requireSlotRefusals(t, refused)

	// Other addresses have their own; an IPv6 client's /64 is one address.
	other, refused := tryStreams(t, inst, id, "198.51.100.9", perAddress, perAddress)
	require.Len(t, other, perAddress)
	require.Empty(t, refused)
	v6, _ := tryStreams(t, inst, id, "2001:db8:1:2::1", perAddress, 1)
	require.Len(t, v6, perAddress)
	requireSlotRefusals(t, []attempt{tryStream(t, inst, id, "2001:db8:1:2::ffff")})
	require.Equal(t, 3*perAddress, inst.App.Streams.Streams())

	// Closed streams give their slots back: the address gets its whole cap
	// again, and no more.
	closeAll(open)
	closeAll(other)
	closeAll(v6)
	requireSlotsGivenBack(t, inst, "seat_streams_per_address")
	open, refused = tryStreams(t, inst, id, "203.0.113.7", perAddress+2, perAddress+2)
	require.Len(t, open, perAddress)
	require.Len(t, refused, 2)
	requireSlotRefusals(t, refused)
	require.Equal(t, "9", metric(t, inst, `capacityd_rate_limited_total{limit="seat_streams_per_address"}`))

	// Streams ended by the server (at shutdown) give theirs back too.
	inst.App.Streams.Close()
	requireSlotsGivenBack(t, inst, "seat_streams_per_address")
}

func TestSeatStreamsPerAddressOffWithANegativeCap(t *testing.T) {
	t.Parallel()
	inst := cappedInstance(t, app.Options{HTTP: httpapi.Config{StreamsPerAddress: -1}, Streams: stream.HubConfig{MaxStreams: 40}})
	id := inst.CreateActivity(t, "no per-address cap", 10)
	open, refused := tryStreams(t, inst, id, "203.0.113.7", 40, 8)
	require.Len(t, open, 40, "past the default per-address cap")
	require.Empty(t, refused)
	// The instance's cap still holds.
	r := tryStream(t, inst, id, "198.51.100.9")
	requireErrorShape(t, r.Response, http.StatusServiceUnavailable, "unavailable")
}

// TestOneAddressCannotTakeEveryStream replays the review's attack: 10,000
// stream requests from one address. With the defaults, the address gets
// DefaultStreamsPerAddress of them and the rest are refused at once, while
// another address is still served.
func TestOneAddressCannotTakeEveryStream(t *testing.T) {
	t.Parallel()
	inst := cappedInstance(t, app.Options{})
	id := inst.CreateActivity(t, "crowd", 10)
	open, refused := tryStreamsWith(t, bulkStreams, inst, id, "203.0.113.66", 10_000, 64)
	require.Len(t, open, httpapi.DefaultStreamsPerAddress)
	require.Len(t, refused, 10_000-httpapi.DefaultStreamsPerAddress)
	requireSlotRefusals(t, refused)
	require.Equal(t, httpapi.DefaultStreamsPerAddress, inst.App.Streams.Streams())

	c := tryStream(t, inst, id, "198.51.100.20")
	require.Equal(t, http.StatusOK, c.Status, "another address is served")
	c.Close()
	closeAll(open)
	requireSlotsGivenBack(t, inst, "seat_streams_per_address")
	require.Equal(t, fmt.Sprint(10_000-httpapi.DefaultStreamsPerAddress),
		metric(t, inst, `capacityd_rate_limited_total{limit="seat_streams_per_address"}`))
}

// longPolls starts n long polls (wait=30) of the activity's event feed
// after seq at once, with token. Their answers arrive on the channel;
// cancel ends those still waiting.
func longPolls(t *testing.T, inst *apptest.Instance, token, activityID string, after, n int) (answers <-chan attempt, cancel func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out := make(chan attempt, n)
	url := fmt.Sprintf("%s/v1/activities/%s/events?after=%d&wait=30", inst.URL, activityID, after)
	for range n {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				t.Errorf("long poll: %v", err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := checkedStreams.Do(req)
			if err != nil {
				out <- attempt{} // cancelled
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				out <- attempt{}
				return
			}
			out <- attempt{Response: apptest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}}
		}()
	}
	return out, cancel
}

// receive takes n answers from answers.
func receive(t *testing.T, answers <-chan attempt, n int) []attempt {
	t.Helper()
	var out []attempt
	for range n {
		select {
		case a := <-answers:
			out = append(out, a)
		case <-time.After(20 * time.Second):
			t.Fatalf("%d answers of %d", len(out), n)
		}
	}
	return out
}

func TestEventLongPollsAreCappedPerAdmin(t *testing.T) {
	t.Parallel()
	const perAdmin = 3
	inst := cappedInstance(t, app.Options{HTTP: httpapi.Config{EventWaitsPerUser: perAdmin}})
	id := inst.CreateActivity(t, "feed", 10)
	alice := inst.Token(t, "alice", true)
	path := "/v1/activities/" + id + "/events"

	// Asked for all at once, the polls past the cap are refused at once,
	// while the cap's wait for an event.
	answers, _ := longPolls(t, inst, alice, id, 0, perAdmin+4)
	requireSlotRefusals(t, receive(t, answers, 4))
	// Polls that do not wait are not long polls and are not capped; another
	// admin has their own slots.
	r := inst.MustDo(t, http.MethodGet, path+"?wait=0", alice, nil)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	r = inst.MustDo(t, http.MethodGet, path, alice, nil)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	r = inst.MustDo(t, http.MethodGet, path+"?wait=1", inst.Token(t, "bob", true), nil)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	// An event answers the waiting polls.
	inst.MustSignup(t, id, "u1")
	for _, a := range receive(t, answers, perAdmin) {
		require.Equal(t, http.StatusOK, a.Status, "body: %s", a.Body)
		require.Contains(t, string(a.Body), `"seq":1`)
	}
	requireSlotsGivenBack(t, inst, "event_waits_per_user")

	// Polls the client gives up on give their slots back too.
	answers, cancel := longPolls(t, inst, alice, id, 1, perAdmin+1)
	requireSlotRefusals(t, receive(t, answers, 1))
	cancel()
	receive(t, answers, perAdmin)
	requireSlotsGivenBack(t, inst, "event_waits_per_user")
	answers, _ = longPolls(t, inst, alice, id, 1, perAdmin+2)
	requireSlotRefusals(t, receive(t, answers, 2))
	require.Equal(t, "7", metric(t, inst, `capacityd_rate_limited_total{limit="event_waits_per_user"}`))
}
