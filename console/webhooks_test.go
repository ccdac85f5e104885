package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/webhook"
)

// TestAWebhookShowsItsDeliveriesAndAttempts: an admin registers a webhook
// through the form (a refused URL shown beside its field); its signing
// secret is shown in the answer only; a signup through the API is
// delivered, and the webhook's page shows the delivery and the delivery's
// page its attempt; deleting it empties the list. Every page passes
// axe-core in every language.
func TestAWebhookShowsItsDeliveriesAndAttempts(t *testing.T) {
	t.Parallel()
	var received atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("webhook-signature") != "" {
			received.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	inst := apptest.Start(t, apptest.Options{App: app.Options{WebhookGuard: webhook.Guard{AllowPrivate: true}}})
	act := inst.CreateActivity(t, "Grand rounds", 10)
	s := signInTab(t, inst, "en", "ana", "admin")

	s.open("/console/webhooks/new")
	s.fill(map[string]string{"webhook-url": "ftp://example.org/hooks"})
	s.submit("main form.stack button[type=submit]", "main h1")
	require.Contains(t, text(t, s.ctx, "#webhook-url-error"), "http or https")
	require.Equal(t, "true", attr(t, s.ctx, "#webhook-url", "aria-invalid"))
	s.fill(map[string]string{"webhook-url": receiver.URL + "/hooks"})
	s.submit("main form.stack button[type=submit]", "main h1")
	secret := strings.TrimSpace(text(t, s.ctx, "#webhook-secret"))
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)
	s.accessible("the new webhook's secret")
	hook := strings.TrimPrefix(attr(t, s.ctx, "#webhook-link", "href"), "/console/webhooks/")
	require.True(t, strings.HasPrefix(hook, "wh_"), hook)

	s.open("/console/webhooks")
	require.Equal(t, 1, countOf(t, s.ctx, "tr.webhook"))
	require.NotContains(t, eval[string](s, `document.documentElement.outerHTML`), secret, "the secret is shown once")

	inst.MustSignup(t, act, "alice")
	page := "/console/webhooks/" + hook
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.open(page)
		if countOf(t, s.ctx, `tr.delivery[data-state="delivered"]`) == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the signup's delivery is not shown as delivered")
	}
	require.NotContains(t, eval[string](s, `document.documentElement.outerHTML`), secret)
	require.Equal(t, int64(1), received.Load())
	delivery := attr(t, s.ctx, "tr.delivery a", "href")
	s.open(delivery)
	require.Equal(t, 1, countOf(t, s.ctx, "tr.attempt"))
	require.Equal(t, "204", text(t, s.ctx, "tr.attempt .status-code"))

	plAccessibleEverywhere(t, inst, "/console/webhooks", "/console/webhooks/new", page, delivery)
	s.open(page) // a fresh page, with the token of the session the browser holds now
	s.submit("main form[data-confirm] button.danger", "main h1")
	require.Equal(t, "/console/webhooks", s.path())
	require.Equal(t, 0, countOf(t, s.ctx, "tr.webhook"))
	require.Equal(t, 404, s.status(page))
}
