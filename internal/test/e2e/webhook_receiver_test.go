package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// delivery is one request a receiver got.
type delivery struct {
	ID   string
	At   time.Time
	Body []byte
}

// receiver is a webhook receiver started by a test: it verifies every
// request with the Standard Webhooks library (once it knows the secret),
// answers with the status its respond function picks (200 by default),
// and keeps what it got.
type receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	verifier *standardwebhooks.Webhook
	got      []delivery
	bad      []string // why requests failed verification
	// respond picks the status of the n-th request (0-based), and may set
	// headers on w; nil: 200.
	respond func(n int, w http.ResponseWriter, r *http.Request) int
}

func newReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request) int) *receiver {
	t.Helper()
	rc := &receiver{respond: respond}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	rc.mu.Lock()
	n := len(rc.got)
	rc.got = append(rc.got, delivery{ID: r.Header.Get("webhook-id"), At: time.Now(), Body: body})
	switch {
	case err != nil:
		rc.bad = append(rc.bad, "read: "+err.Error())
	case rc.verifier == nil:
		rc.bad = append(rc.bad, "a request before the secret was known")
	case r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json":
		rc.bad = append(rc.bad, "not a JSON POST: "+r.Method+" "+r.Header.Get("Content-Type"))
	default:
		if err := rc.verifier.Verify(body, r.Header); err != nil {
			rc.bad = append(rc.bad, err.Error())
		}
	}
	respond := rc.respond
	rc.mu.Unlock()
	status := http.StatusOK
	if respond != nil {
		status = respond(n, w, r)
	}
	w.WriteHeader(status)
}

// trust sets the secret that requests are verified with.
func (rc *receiver) trust(t *testing.T, secret string) {
	t.Helper()
	v, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	rc.mu.Lock()
	rc.verifier = v
	rc.mu.Unlock()
}

// deliveries returns a copy of what the receiver got.
func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// counts returns how many times each webhook-id arrived.
func (rc *receiver) counts() map[string]int {
	out := map[string]int{}
	for _, d := range rc.deliveries() {
		out[d.ID]++
	}
	return out
}

func (rc *receiver) failures() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.bad...)
}

// createdWebhook is the answer to a webhook's creation.
type createdWebhook struct {
	ID         string   `json:"id"`
	URL        string   `json:"url"`
	Events     []string `json:"events"`
	ActivityID *string  `json:"activity_id"`
	Secret     string   `json:"secret"`
}

// register creates a webhook for rc through the API and makes rc trust its
// secret.
func register(t *testing.T, inst *apptest.Instance, rc *receiver, events []string, activityID *string) createdWebhook {
	t.Helper()
	r := inst.MustDo(t, http.MethodPost, "/v1/webhooks", inst.Token(t, "admin", true),
		map[string]any{"url": rc.srv.URL + "/hook", "events": events, "activity_id": activityID})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var w createdWebhook
	r.JSON(t, &w)
	rc.trust(t, w.Secret)
	return w
}

// payload is a delivery's body.
type payload struct {
	Type      string         `json:"type"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

func decodePayload(t *testing.T, b []byte) payload {
	t.Helper()
	var p payload
	require.NoError(t, json.Unmarshal(b, &p), "%s", b)
	return p
}
