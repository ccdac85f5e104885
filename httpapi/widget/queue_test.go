package widget_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// queuePage is a page of another site, in language lang, with the queue
// widget of service for the user of token; the host page's callback writes
// the admission token it is handed into #got.
func queuePage(lang, service, activity, token string) string {
	return fmt.Sprintf(`<!doctype html><html lang="%[1]s"><head><meta charset="utf-8"><title>on-sale</title></head><body>
<p id="queue"></p>
<p id="got"></p>
<p id="event"></p>
<script src="%[2]s/widget/queue.js"></script>
<script>
  var el = document.getElementById('queue');
  el.addEventListener('capacityd-admitted', function (e) { document.getElementById('event').textContent = e.detail.admissionToken; });
  capacitydQueue.start(el, {activity: %[3]q, token: %[4]q, onAdmitted: function (admissionToken) {
    document.getElementById('got').textContent = admissionToken;
  }});
</script>
</body></html>`, lang, service, activity, token)
}

// TestQueueWidgetOnAnotherSite: on a site of another origin, in English,
// Traditional Chinese (a page in zh-Hant-TW) and Simplified Chinese, the
// widget joins the line, shows the user's
// number while another user holds the only admission (the estimate: up
// to that token's hour), and once admitted
// hands the token to the host page's callback and event; the token signs
// the user up.
func TestQueueWidgetOnAnotherSite(t *testing.T) {
	t.Parallel()
	site := newPages(t)
	inst := apptest.Start(t, apptest.Options{App: app.Options{HTTP: httpapi.Config{CORSAllowedOrigins: []string{site.srv.URL}}}})
	ctx := t.Context()
	admin := inst.API(t, "admin", true)
	act, err := admin.CreateActivity(ctx, client.NewActivity{Title: "Echo course", Capacity: 10,
		Queue: &client.QueueSettings{AdmitPerSecond: 1, MaxAdmitted: 1, TokenSeconds: 3600}})
	require.NoError(t, err)
	// The first in line holds the only admission until they sign up.
	first := inst.API(t, "first", false)
	_, err = first.JoinQueue(ctx, act.ID)
	require.NoError(t, err)
	var held client.Ticket
	require.Eventually(t, func() bool {
		held, err = first.QueueTicket(ctx, act.ID)
		return err == nil && held.State == "admitted"
	}, 10*time.Second, 50*time.Millisecond)

	page := tab(t)
	en := site.add("/en", queuePage("en", inst.URL, act.ID, inst.Token(t, "visitor", false)))
	do(t, page, 15*time.Second,
		chromedp.Navigate(en),
		waitAttr("#queue", "data-queue-state", "waiting", 5*time.Second),
		waitText("#queue", "You are number 2 in line \u00b7 about 60 min", time.Second),
	)
	tw := site.add("/zh-Hant-TW", queuePage("zh-Hant-TW", inst.URL, act.ID, inst.Token(t, "visitor", false)))
	do(t, page, 15*time.Second,
		chromedp.Navigate(tw),
		waitText("#queue", "您的順位：第 2 位 \u00b7 預計等候約 60 分鐘", 5*time.Second),
	)
	zh := site.add("/zh", queuePage("zh-CN", inst.URL, act.ID, inst.Token(t, "visitor", false)))
	do(t, page, 15*time.Second,
		chromedp.Navigate(zh),
		waitText("#queue", "您排在第 2 位 \u00b7 约 60 分钟", 5*time.Second),
	)
	screenshot(t, page)

	_, err = first.Signup(ctx, act.ID, client.SignupOptions{AdmissionToken: *held.AdmissionToken})
	require.NoError(t, err)
	do(t, page, 20*time.Second, waitText("#queue", "轮到您了，请立即报名", 15*time.Second))
	got, event := text(t, page, "#got"), text(t, page, "#event")
	require.Regexp(t, `^adm_[0-9a-f]{64}$`, got)
	require.Equal(t, got, event, "the callback and the event carry the same token")
	res, err := inst.API(t, "visitor", false).Signup(ctx, act.ID, client.SignupOptions{AdmissionToken: got})
	require.NoError(t, err)
	require.EqualValues(t, "pending", res.Registration.Status)
}
