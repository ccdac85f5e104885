package apicheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// prismBin is Prism, installed by `make npm-tools` (scripts/npm-tools.sh)
// from tools/npm's lockfile, relative to the repository's root.
const prismBin = "tools/npm/node_modules/.bin/prism"

// prismViolation marks Prism's own answers: a problem whose type is one
// of Prism's errors (a violation of the description, or a route it does
// not know).
const prismViolation = "stoplight.io/prism/errors#"

// repoRoot is the repository's root: the nearest folder above this file's
// that holds go.mod.
func repoRoot(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	for dir := filepath.Dir(file); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("no go.mod above %s", file)
		}
	}
}

// startPrism runs Prism as a validating proxy of api/openapi.yaml in front
// of upstream, on a free loopback port, and returns its URL once it
// forwards requests, with its output. It stops when t ends; its output is
// logged when t fails.
func startPrism(t *testing.T, upstream string) (string, *lockedBuffer) {
	t.Helper()
	root := repoRoot(t)
	bin := filepath.Join(root, prismBin)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no Prism at %s: run `make npm-tools` (scripts/npm-tools.sh)", prismBin)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	out := &lockedBuffer{}
	cmd := exec.Command(bin, "proxy", "--errors", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		filepath.Join(root, "api", "openapi.yaml"), upstream)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prism output:\n%s", out.String())
		}
	})
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	// Prism starts in a few seconds on an idle machine; the bound leaves
	// room for a loaded one.
	require.Eventually(t, func() bool {
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 90*time.Second, 100*time.Millisecond, "prism did not start:\n%s", out)
	return url, out
}

// lockedBuffer is a bytes.Buffer that a process's two outputs share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// prismClient sends requests through Prism and fails the test on any
// answer of Prism's own: every exchange must keep to the description.
type prismClient struct {
	t    *testing.T
	base string
	http *http.Client
}

// with returns the client for the (sub)test t.
func (c *prismClient) with(t *testing.T) *prismClient {
	cc := *c
	cc.t = t
	return &cc
}

// reply is one response, read whole.
type reply struct {
	status int
	body   []byte
}

// field returns the string at the top-level key of a JSON object body.
func (r reply) field(t *testing.T, key string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "%s", r.body)
	s, _ := m[key].(string)
	return s
}

// do sends one request and requires status want (any status when want is
// 0); body is sent as JSON unless nil.
func (c *prismClient) do(want int, method, path, token string, body any, headers ...string) reply {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(c.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, rd)
	require.NoError(c.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	require.NoError(c.t, err, "%s %s", method, path)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	if strings.Contains(string(b), prismViolation) {
		c.t.Fatalf("%s %s: Prism reports a violation of api/openapi.yaml:\n%s", method, path, b)
	}
	if want != 0 {
		require.Equal(c.t, want, resp.StatusCode, "%s %s: %s", method, path, b)
	}
	return reply{status: resp.StatusCode, body: b}
}

// TestThroughPrism runs the end-to-end flows through Prism, a validating
// proxy of api/openapi.yaml written by others than the service's own
// checker (kin-openapi): any request or response Prism finds breaking the
// description fails it, so the description cannot drift from the service
// in a way only our own checker accepts.
func TestThroughPrism(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prism (node): not under -short")
	}
	inst := apptest.Start(t, apptest.Options{})
	base, prismOut := startPrism(t, inst.URL)
	c := &prismClient{t: t, base: base, http: &http.Client{Timeout: 30 * time.Second}}
	admin := inst.Token(t, "prism-admin", true)
	users := make([]string, 4)
	for i := range users {
		users[i] = inst.Token(t, fmt.Sprintf("prism-user-%d", i), false)
	}

	t.Run("operations", func(t *testing.T) { prismOperations(c.with(t)) })
	t.Run("activities", func(t *testing.T) { prismActivities(c.with(t), admin, users) })
	t.Run("pools series blocks", func(t *testing.T) { prismPoolsSeriesBlocks(c.with(t), admin, users) })
	t.Run("queue", func(t *testing.T) { prismQueue(c.with(t), admin, users) })
	t.Run("webhooks", func(t *testing.T) { prismWebhooks(c.with(t), admin) })
	t.Run("notes", func(t *testing.T) { prismNotes(c.with(t), admin) })
	t.Run("doors and attendance", func(t *testing.T) { prismDoors(c.with(t), admin, users) })
	t.Run("errors", func(t *testing.T) { prismErrors(c.with(t), admin, users) })
	// A violation Prism only warns about is logged, not answered.
	require.NotContains(t, prismOut.String(), "Violation:", "Prism reports a violation of api/openapi.yaml")
}

func prismOperations(c *prismClient) {
	c.do(200, "GET", "/healthz", "", nil)
	c.do(200, "GET", "/readyz", "", nil)
	c.do(200, "GET", "/metrics", "", nil)
	c.do(200, "GET", "/openapi.yaml", "", nil)
	c.do(200, "GET", "/widget/seats.js", "", nil)
	c.do(404, "GET", "/widget/nothing.js", "", nil)
}

// prismActivities creates an activity with a waiting list of one seat,
// fills it, waitlists, cancels (promoting the waiting user) and reads the
// registrations, their events and the activity's feed.
func prismActivities(c *prismClient, admin string, users []string) {
	t := c.t
	act := c.do(201, "POST", "/v1/activities", admin, map[string]any{"title": "Prism rounds", "capacity": 1, "waitlist": true})
	id := act.field(t, "id")
	c.do(200, "GET", "/v1/activities/"+id, "", nil)
	c.do(200, "GET", "/v1/activities/"+id, admin, nil)
	c.do(200, "GET", "/v1/activities?limit=10", admin, nil)
	c.do(200, "PATCH", "/v1/activities/"+id, admin, map[string]any{"title": "Prism grand rounds"})

	first := c.do(201, "POST", "/v1/activities/"+id+"/registrations", users[0], map[string]any{}, "Idempotency-Key", "prism-1")
	c.do(201, "POST", "/v1/activities/"+id+"/registrations", users[0], map[string]any{}, "Idempotency-Key", "prism-1")
	c.do(409, "POST", "/v1/activities/"+id+"/registrations", users[0], map[string]any{})
	second := c.do(202, "POST", "/v1/activities/"+id+"/registrations", users[1], map[string]any{"metadata": map[string]any{"team": "b"}})
	c.do(200, "GET", "/v1/activities/"+id+"/seats", "", nil)
	c.do(200, "GET", "/v1/me/registrations", users[1], nil)
	firstID, secondID := first.field(t, "id"), second.field(t, "id")
	c.do(200, "GET", "/v1/registrations/"+firstID, users[0], nil)
	c.do(404, "GET", "/v1/registrations/"+firstID, users[1], nil)
	c.do(200, "POST", "/v1/registrations/"+firstID+"/cancel", users[0], nil)
	c.do(200, "POST", "/v1/registrations/"+firstID+"/cancel", users[0], nil)
	require.Eventually(t, func() bool {
		return c.do(200, "GET", "/v1/registrations/"+secondID, users[1], nil).field(t, "status") != "waitlisted"
	}, 10*time.Second, 20*time.Millisecond, "the waiting user was not promoted")
	c.do(200, "POST", "/v1/registrations/"+secondID+"/status", admin, map[string]any{"status": "approved"})
	c.do(200, "GET", "/v1/registrations/"+secondID+"/events", users[1], nil)
	c.do(200, "GET", "/v1/activities/"+id+"/events", admin, nil)
	c.do(200, "GET", "/v1/activities/"+id+"/events?after=0&limit=5", admin, nil)
	c.do(200, "GET", "/v1/activities/"+id+"/registrations?limit=1", admin, nil)
	c.do(200, "GET", "/v1/activities/"+id+"/registrations.csv", admin, nil)

	parties := c.do(201, "POST", "/v1/activities", admin, map[string]any{"title": "Prism parties", "capacity": 5, "max_seats_per_registration": 3})
	pid := parties.field(t, "id")
	party := c.do(201, "POST", "/v1/activities/"+pid+"/registrations", users[2], map[string]any{"seats": 3})
	c.do(200, "POST", "/v1/registrations/"+party.field(t, "id")+"/seats", users[2], map[string]any{"seats": 1})
}

func prismPoolsSeriesBlocks(c *prismClient, admin string, users []string) {
	t := c.t
	pool := c.do(201, "POST", "/v1/pools", admin, map[string]any{"title": "Prism hall", "capacity": 3})
	poolID := pool.field(t, "id")
	c.do(200, "GET", "/v1/pools", admin, nil)
	c.do(200, "GET", "/v1/pools/"+poolID, "", nil)
	c.do(200, "PATCH", "/v1/pools/"+poolID, admin, map[string]any{"capacity": 4})
	series := c.do(201, "POST", "/v1/series", admin, map[string]any{"title": "Prism course", "max_per_user": 1})
	seriesID := series.field(t, "id")
	c.do(200, "GET", "/v1/series", admin, nil)
	c.do(200, "GET", "/v1/series/"+seriesID, admin, nil)
	c.do(200, "PATCH", "/v1/series/"+seriesID, admin, map[string]any{"max_per_user": 1})
	a := c.do(201, "POST", "/v1/activities", admin, map[string]any{"title": "Prism workshop A", "capacity": 3, "pools": []string{poolID}, "series_id": seriesID})
	b := c.do(201, "POST", "/v1/activities", admin, map[string]any{"title": "Prism workshop B", "capacity": 3, "series_id": seriesID})
	c.do(201, "POST", "/v1/activities/"+a.field(t, "id")+"/registrations", users[3], map[string]any{})
	c.do(409, "POST", "/v1/activities/"+b.field(t, "id")+"/registrations", users[3], map[string]any{})

	block := c.do(201, "POST", "/v1/activities/"+b.field(t, "id")+"/blocks", admin, map[string]any{"code": "speakers", "seats": 1})
	c.do(200, "GET", "/v1/activities/"+b.field(t, "id")+"/blocks", admin, nil)
	c.do(204, "DELETE", "/v1/blocks/"+block.field(t, "id"), admin, nil)
}

// prismQueue joins the admission queue of an activity that opens later,
// reads the ticket, is refused a signup before the opening and one
// without an admission token, and removes the queue and the opening (nulls
// in a request).
func prismQueue(c *prismClient, admin string, users []string) {
	t := c.t
	act := c.do(201, "POST", "/v1/activities", admin, map[string]any{"title": "Prism on-sale", "capacity": 10,
		"opens_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"queue":    map[string]any{"admit_per_second": 5, "max_admitted": 5}})
	id := act.field(t, "id")
	c.do(200, "POST", "/v1/activities/"+id+"/queue", users[0], nil)
	c.do(200, "GET", "/v1/activities/"+id+"/queue/me", users[0], nil)
	c.do(409, "POST", "/v1/activities/"+id+"/registrations", users[1], map[string]any{})
	c.do(200, "PATCH", "/v1/activities/"+id, admin, map[string]any{"opens_at": nil})
	c.do(403, "POST", "/v1/activities/"+id+"/registrations", users[1], map[string]any{})
	c.do(200, "PATCH", "/v1/activities/"+id, admin, map[string]any{"queue": nil})
	c.do(201, "POST", "/v1/activities/"+id+"/registrations", users[1], map[string]any{})
}

func prismWebhooks(c *prismClient, admin string) {
	t := c.t
	hook := c.do(201, "POST", "/v1/webhooks", admin, map[string]any{"url": "https://hooks.example/capacityd", "events": []string{"registration.created"}})
	id := hook.field(t, "id")
	c.do(200, "GET", "/v1/webhooks", admin, nil)
	c.do(200, "GET", "/v1/webhooks/"+id, admin, nil)
	c.do(200, "GET", "/v1/webhooks/"+id+"/deliveries", admin, nil)
	c.do(204, "DELETE", "/v1/webhooks/"+id, admin, nil)
}

func prismNotes(c *prismClient, admin string) {
	c.do(0, "PUT", "/v1/notes/prism-note", admin, nil)
	c.do(200, "POST", "/v1/notes/prism-note/views", "", nil)
	c.do(200, "POST", "/v1/notes/prism-note/waters", "", nil)
	c.do(200, "GET", "/v1/notes/prism-note/stats", "", nil)
}

// prismErrors sends requests that keep to the description and are
// refused: each refusal must be one the description documents.
func prismErrors(c *prismClient, admin string, users []string) {
	t := c.t
	c.do(404, "GET", "/v1/activities/a_01JD0000000000000000000000", "", nil)
	c.do(404, "GET", "/v1/registrations/r_01JD0000000000000000000000", admin, nil)
	c.do(403, "GET", "/v1/activities", users[0], nil)
	c.do(401, "GET", "/v1/activities", "not-a-token", nil)
	full := c.do(201, "POST", "/v1/activities", admin, map[string]any{"title": "Prism full", "capacity": 0})
	c.do(409, "POST", "/v1/activities/"+full.field(t, "id")+"/registrations", users[0], map[string]any{})
	closed := c.do(201, "POST", "/v1/activities", admin, map[string]any{"title": "Prism closed", "capacity": 5, "opens_at": "2099-01-01T00:00:00Z"})
	c.do(409, "POST", "/v1/activities/"+closed.field(t, "id")+"/registrations", users[0], map[string]any{})
}

// prismDoors runs a door: a ticket, a list, scans (accepted, refused,
// forced, exit, walk-in), the history, the sync feed, the keys, a
// confirmation, and the attendance reads of an activity that has ended.
func prismDoors(c *prismClient, admin string, users []string) {
	t := c.t
	start := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	end := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	act := c.do(201, "POST", "/v1/activities", admin, map[string]any{"title": "Prism door", "capacity": 3, "waitlist": true,
		"starts_at": start, "ends_at": end, "attendance_percent": 50})
	id := act.field(t, "id")
	reg := c.do(201, "POST", "/v1/activities/"+id+"/registrations", users[3], map[string]any{})
	regID := reg.field(t, "id")
	c.do(200, "POST", "/v1/registrations/"+regID+"/confirm", users[3], nil)
	ticket := c.do(200, "GET", "/v1/registrations/"+regID+"/ticket", users[3], nil).field(t, "ticket")
	c.do(200, "GET", "/v1/registrations/"+regID+"/ticket.svg", users[3], nil)
	c.do(200, "GET", "/v1/checkin/keys", "", nil)
	list := c.do(201, "POST", "/v1/checkin-lists", admin, map[string]any{"name": "Prism door", "activity_ids": []string{id},
		"max_inside": 2, "door_roles": []string{"prism-door"}})
	lid := list.field(t, "id")
	c.do(200, "GET", "/v1/checkin-lists/"+lid, admin, nil)
	c.do(200, "GET", "/v1/checkin-lists?activity_id="+id, admin, nil)
	c.do(200, "PATCH", "/v1/checkin-lists/"+lid, admin, map[string]any{"entry": "reentry"})
	first := c.do(200, "GET", "/v1/checkin-lists/"+lid+"/tickets?limit=10", admin, nil)
	c.do(200, "POST", "/v1/checkin-lists/"+lid+"/redeem", admin, map[string]any{"ticket": ticket, "device": "prism-1",
		"force": true, "at": start}, "Idempotency-Key", "prism-scan-1")
	c.do(409, "POST", "/v1/checkin-lists/"+lid+"/redeem", admin, map[string]any{"ticket": ticket, "device": "prism-2"})
	c.do(400, "POST", "/v1/checkin-lists/"+lid+"/redeem", admin, map[string]any{"ticket": "not.a.ticket", "device": "prism-2"})
	c.do(200, "POST", "/v1/checkin-lists/"+lid+"/redeem", admin, map[string]any{"registration_id": regID, "device": "prism-1",
		"type": "exit", "force": true, "at": end})
	c.do(201, "POST", "/v1/checkin-lists/"+lid+"/walk-ins", admin, map[string]any{"activity_id": id, "user_id": "prism-walker"})
	c.do(200, "GET", "/v1/checkin-lists/"+lid+"/checkins?after=0&limit=10", admin, nil)
	c.do(200, "GET", "/v1/checkin-lists/"+lid+"/tickets?cursor="+first.field(t, "next_cursor"), admin, nil)
	c.do(200, "GET", "/v1/activities/"+id+"/attendance", admin, nil)
	c.do(200, "GET", "/v1/activities/"+id+"/attendance.csv", admin, nil)
	c.do(200, "GET", "/v1/registrations/"+regID+"/attendance", users[3], nil)
	series := c.do(201, "POST", "/v1/series", admin, map[string]any{"title": "Prism door course", "max_per_user": 1})
	c.do(200, "GET", "/v1/series/"+series.field(t, "id")+"/attendance?room=100&risk=0.05", admin, nil)
	c.do(204, "DELETE", "/v1/checkin-lists/"+lid, admin, nil)
}
