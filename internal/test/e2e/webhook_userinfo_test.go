package e2e

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/webhook"
)

// TestURLsWithCredentialsAreRefused: a URL with userinfo (a user name, a
// password, or both, plain or percent-encoded) is refused at creation with
// invalid_request, whose message says what to use instead, and nothing is
// stored.
func TestURLsWithCredentialsAreRefused(t *testing.T) {
	t.Parallel()
	inst := setup(t, app.Options{})
	admin := inst.Token(t, "admin", true)
	for _, u := range []string{
		"http://alice:s3cret@127.0.0.1:9/hook", "https://alice@127.0.0.1:9/hook", "http://:s3cret@127.0.0.1:9/hook",
		"http://@127.0.0.1:9/hook", "http://al%40ice:s3%3Acret@127.0.0.1:9/hook", "HTTPS://alice:s3cret@example.org/",
	} {
		r := inst.MustDo(t, http.MethodPost, "/v1/webhooks", admin, map[string]any{"url": u, "events": []string{"*"}})
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", u, r.Body)
		require.Equal(t, "invalid_request", r.ErrorCode(), u)
		require.Contains(t, string(r.Body), "signature", u)
		require.NotContains(t, string(r.Body), "s3", "the message does not repeat the credentials")
		require.NotContains(t, string(r.Body), "alice", "the message does not repeat the credentials")
	}
	var n int
	require.NoError(t, inst.App.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook`).Scan(&n))
	require.Zero(t, n)
}

// TestStoredCredentialsAreNotShown: a webhook whose URL carries
// credentials (stored before they were refused) is listed and read with
// them redacted.
func TestStoredCredentialsAreNotShown(t *testing.T) {
	t.Parallel()
	inst := setup(t, app.Options{})
	admin := inst.Token(t, "admin", true)
	created := do(t, inst, http.MethodPost, "/v1/webhooks", admin, map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}}, http.StatusCreated)
	id := created["id"].(string)
	_, err := inst.App.Pool.Exec(context.Background(), `UPDATE webhook SET url = 'http://alice:s3cret@127.0.0.1:9/hook?x=1' WHERE public_id = $1`, id)
	require.NoError(t, err)

	list := inst.MustDo(t, http.MethodGet, "/v1/webhooks", admin, nil)
	require.Equal(t, http.StatusOK, list.Status, "%s", list.Body)
	one := inst.MustDo(t, http.MethodGet, "/v1/webhooks/"+id, admin, nil)
	require.Equal(t, http.StatusOK, one.Status, "%s", one.Body)
	for _, body := range [][]byte{list.Body, one.Body} {
		require.NotContains(t, string(body), "s3cret")
		require.NotContains(t, string(body), "alice")
		require.Contains(t, string(body), `"url":"http://redacted@127.0.0.1:9/hook?x=1"`)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"http://127.0.0.1:9/hook":         "http://127.0.0.1:9/hook",
		"https://u:p@example.org/a?b=c#d": "https://redacted@example.org/a?b=c#d",
		"https://u@example.org/":          "https://redacted@example.org/",
		"https://:p@example.org/":         "https://redacted@example.org/",
		"http://%zz":                      "redacted",
		"":                                "",
	} {
		require.Equal(t, want, webhook.RedactURL(raw), raw)
	}
}
