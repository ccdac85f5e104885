package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/registration"
)

// TestSignatureVerifiesAndFollowsTheSpecification: the headers verify with
// the Standard Webhooks library given the secret as shown to the admin,
// and the signature is the specification's HMAC computed here by hand.
func TestSignatureVerifiesAndFollowsTheSpecification(t *testing.T) {
	t.Parallel()
	key, secret, err := newSecret()
	require.NoError(t, err)
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, secret)
	body := []byte(`{"type":"registration.created","timestamp":"2026-11-30T10:00:00Z","data":{}}`)
	at := time.Now()
	h := http.Header{}
	require.NoError(t, sign(h, key, "ev_1_2", at, body))

	require.Equal(t, "ev_1_2", h.Get("webhook-id"))
	require.Equal(t, strconv.FormatInt(at.Unix(), 10), h.Get("webhook-timestamp"))
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(body, h))

	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("ev_1_2." + h.Get("webhook-timestamp") + "." + string(body)))
	require.Equal(t, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)), h.Get("webhook-signature"))

	require.Error(t, wh.Verify(append(body, ' '), h), "a changed body does not verify")
	other, _ := standardwebhooks.NewWebhook("whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32)))
	require.Error(t, other.Verify(body, h), "another secret does not verify")
}

func TestSealerKeepsSecretsForTheirWebhookOnly(t *testing.T) {
	t.Parallel()
	k, err := ParseKey(base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")))
	require.NoError(t, err)
	s, err := NewSealer(k)
	require.NoError(t, err)
	secret := []byte("the webhook's signing key, 32 b!")
	sealed, err := s.Seal("wh_A", secret)
	require.NoError(t, err)
	require.NotContains(t, string(sealed), string(secret))
	again, _ := s.Seal("wh_A", secret)
	require.NotEqual(t, sealed, again, "a fresh nonce each time")

	opened, err := s.Open("wh_A", sealed)
	require.NoError(t, err)
	require.Equal(t, secret, opened)
	_, err = s.Open("wh_B", sealed)
	require.Error(t, err, "bound to its webhook")
	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)-1] ^= 1
	_, err = s.Open("wh_A", tampered)
	require.Error(t, err)
	otherKey, _ := NewSealer([]byte("ffffffffffffffffffffffffffffffff"))
	_, err = otherKey.Open("wh_A", sealed)
	require.Error(t, err, "another key opens nothing")

	require.False(t, inClear(sealed))

	// Without a key: kept in clear, which any Sealer opens; a sealed
	// secret needs the key.
	none, err := NewSealer(nil)
	require.NoError(t, err)
	require.False(t, none.Keyed())
	clear, err := none.Seal("wh_A", secret)
	require.NoError(t, err)
	require.True(t, inClear(clear))
	require.Equal(t, append([]byte{0}, secret...), clear)
	for _, sealer := range []*Sealer{none, s, otherKey} {
		opened, err := sealer.Open("wh_A", clear)
		require.NoError(t, err)
		require.Equal(t, secret, opened)
	}
	_, err = none.Open("wh_A", sealed)
	require.ErrorIs(t, err, ErrNoKey)
	require.False(t, inClear(clear[:len(clear)-1]), "only a whole key")

	for _, bad := range []string{"", "short", base64.StdEncoding.EncodeToString(make([]byte, 16)), "not base64 !!"} {
		_, err := ParseKey(bad)
		require.Error(t, err, bad)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		got, err := ParseKey(enc.EncodeToString(k))
		require.NoError(t, err)
		require.Equal(t, k, got)
	}
}

func TestRetryDelaysGrowToAnHour(t *testing.T) {
	t.Parallel()
	base := 5 * time.Second
	require.Equal(t, base, retryDelay(base, 1, 0))
	require.Equal(t, 2*base, retryDelay(base, 2, 0))
	require.Equal(t, 4*base, retryDelay(base, 3, 0))
	require.Equal(t, MaxRetryDelay, retryDelay(base, 20, 0))
	require.Equal(t, MaxRetryDelay, retryDelay(base, 1000, 0), "no overflow")
	for attempt := 1; attempt < 40; attempt++ {
		lo, hi := retryDelay(base, attempt, 0), retryDelay(base, attempt, 0.999999)
		require.LessOrEqual(t, hi, MaxRetryDelay)
		require.GreaterOrEqual(t, lo, base, "no retry comes sooner than the base delay")
		require.LessOrEqual(t, hi, lo*12/10+time.Millisecond, "jitter adds at most a fifth")
		if next := retryDelay(base, attempt+1, 0); hi < MaxRetryDelay/2 {
			require.Greater(t, next, hi, "every delay is longer than the one before, whatever the jitter")
		}
	}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, status := range []int{200, 201, 204, 299} {
		o, _ := judge(status, 1, now, now, time.Second)
		require.Equal(t, OutcomeDelivered, o, status)
	}
	o, _ := judge(http.StatusGone, 1, now, now, time.Second)
	require.Equal(t, OutcomeGone, o)
	for _, status := range []int{0, 301, 302, 400, 404, 429, 500, 503} {
		o, d := judge(status, 3, now, now, time.Second)
		require.Equal(t, OutcomeRetry, o, status)
		require.InDelta(t, 4*time.Second, d, float64(time.Second))
	}
	o, _ = judge(500, 30, now.Add(-RetryWindow+time.Minute), now, time.Second)
	require.Equal(t, OutcomeFailed, o, "retries end 24 h after the event")
}

func TestPayloadIsTheEventWithItsRegistration(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	from := registration.Waitlisted
	reg := registration.Registration{ID: "r_1", ActivityID: "a_1", UserID: "alice", Status: registration.Pending,
		Metadata: json.RawMessage(`{"k":1}`), CreatedAt: at, UpdatedAt: at}
	e := registration.Event{ID: "ev_1_7", Seq: 7, ActivityID: "a_1", RegistrationID: "r_1", UserID: "alice",
		Type: registration.EventPromoted, From: &from, To: registration.Pending, Actor: "system", At: at, Registration: &reg}
	b, err := Payload(e)
	require.NoError(t, err)
	var p map[string]any
	require.NoError(t, json.Unmarshal(b, &p))
	require.Equal(t, "registration.promoted", p["type"])
	require.Equal(t, "2026-11-30T10:00:00Z", p["timestamp"])
	data := p["data"].(map[string]any)
	require.Equal(t, "ev_1_7", data["id"])
	require.EqualValues(t, 7, data["seq"])
	require.Equal(t, "waitlisted", data["from"])
	require.Equal(t, "pending", data["to"])
	require.Equal(t, map[string]any{"k": float64(1)}, data["registration"].(map[string]any)["metadata"])

	eventOnly, _ := json.Marshal(e)
	var want map[string]any
	require.NoError(t, json.Unmarshal(eventOnly, &want))
	delete(data, "registration")
	require.Equal(t, want, data, "data is the event as the history shows it, plus the registration")
}

// TestCommitsOfAnActivityWhoseBatchesAreHeldWaitForTheirRecord: while the
// instance holds a batch of every webhook its last claim of an activity
// served, a commit of that activity claims nothing (the cursors are
// leased); once one webhook's batch is recorded, the activity is claimed
// again, so a slow receiver's batch holds up no other webhook.
func TestCommitsOfAnActivityWhoseBatchesAreHeldWaitForTheirRecord(t *testing.T) {
	t.Parallel()
	d := &Dispatcher{holding: map[string]map[int64]int{}, claimed: map[string][]int64{},
		deferred: map[string]bool{}, dirty: map[string]bool{}}
	slow := &Batch{WebhookID: 1, ActivityID: 7, Activity: "a_X", Jobs: 2}
	fast := &Batch{WebhookID: 2, ActivityID: 7, Activity: "a_X", Jobs: 1}
	other := &Batch{WebhookID: 1, ActivityID: 8, Activity: "a_Y", Jobs: 1}
	d.hold([]Job{{Attempt: 2}, {Batch: slow}, {Batch: slow}, {Batch: fast}, {Batch: other}})
	require.True(t, d.covered("a_X"))
	require.True(t, d.covered("a_Y"))
	require.False(t, d.covered("a_Z"), "an activity it holds nothing of")

	d.deferred["a_X"] = true // a commit came
	require.True(t, d.release([]Attempt{{Batch: fast}}), "the fast webhook's batch recorded: claim the activity")
	require.True(t, d.dirty["a_X"])
	require.Empty(t, d.deferred)
	require.False(t, d.covered("a_X"))

	// The next claim gives the fast webhook its next batch: the activity
	// is covered again, the slow one's batch still held.
	next := &Batch{WebhookID: 2, ActivityID: 7, Activity: "a_X", Jobs: 1}
	d.hold([]Job{{Batch: next}})
	require.Equal(t, []int64{2}, d.claimed["a_X"])
	require.True(t, d.covered("a_X"))
	clear(d.dirty)
	d.deferred["a_X"] = true
	require.False(t, d.release([]Attempt{{Batch: slow}, {Batch: slow}}), "still covered by the fast webhook's batch")
	require.Empty(t, d.dirty)
	require.True(t, d.release([]Attempt{{Batch: next}}))
	require.Equal(t, map[string]map[int64]int{"a_Y": {1: 1}}, d.holding, "nothing held of a_X any more")
	require.NotContains(t, d.claimed, "a_X")
}
