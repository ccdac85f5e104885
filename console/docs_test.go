package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// docLangs are the languages of the pictures in docs/console.md.
var docLangs = []string{"en", "zh-TW"}

// docPage is one page of docs/console.md's pictures: its name and its
// path in a scene.
type docPage struct {
	name string
	path func(sc docScene) string
}

// docScene is what the pictures show: a pool of two activities, one with
// a waiting list, signups, a block, a check-in list with check-ins, a
// series, a webhook, and an ended activity with its attendance.
type docScene struct {
	pool, series, activity, other, ended, list, registration, webhook string
}

var docPages = []docPage{
	{"home", func(docScene) string { return "/console/" }},
	{"activities", func(docScene) string { return "/console/activities" }},
	{"activity-new", func(docScene) string { return "/console/activities/new" }},
	{"activity", func(sc docScene) string { return "/console/activities/" + sc.activity }},
	{"activity-edit", func(sc docScene) string { return "/console/activities/" + sc.activity + "/edit" }},
	{"registrations", func(sc docScene) string { return "/console/activities/" + sc.activity + "/registrations" }},
	{"registration", func(sc docScene) string { return "/console/registrations/" + sc.registration }},
	{"waiting", func(sc docScene) string { return "/console/activities/" + sc.activity + "/waiting" }},
	{"blocks", func(sc docScene) string { return "/console/activities/" + sc.activity + "/blocks" }},
	{"onsale", func(sc docScene) string { return "/console/activities/" + sc.activity + "/onsale" }},
	{"pools", func(docScene) string { return "/console/pools" }},
	{"pool", func(sc docScene) string { return "/console/pools/" + sc.pool }},
	{"series", func(sc docScene) string { return "/console/series/" + sc.series }},
	{"webhooks", func(docScene) string { return "/console/webhooks" }},
	{"webhook", func(sc docScene) string { return "/console/webhooks/" + sc.webhook }},
	{"checkin-lists", func(docScene) string { return "/console/checkin-lists" }},
	{"checkin-list", func(sc docScene) string { return "/console/checkin-lists/" + sc.list }},
	{"attendance", func(sc docScene) string { return "/console/activities/" + sc.ended + "/attendance" }},
	{"door", func(sc docScene) string { return "/console/doors/" + sc.list }},
}

// newDocScene makes the scene on inst through the API.
func newDocScene(t *testing.T, inst *apptest.Instance) docScene {
	t.Helper()
	ctx := context.Background()
	api := inst.API(t, "admin", true)
	var sc docScene
	pool, err := api.CreatePool(ctx, client.NewPool{Title: "Main hall", Capacity: 120})
	require.NoError(t, err)
	series, err := api.CreateSeries(ctx, client.NewSeries{Title: "Cardiology 2027", MaxPerUser: 2})
	require.NoError(t, err)
	a, err := api.CreateActivity(ctx, client.NewActivity{Title: "Cardiology grand rounds", Capacity: 5, Waitlist: true,
		MaxSeatsPerRegistration: 2, Pools: []string{pool.ID}, SeriesID: series.ID})
	require.NoError(t, err)
	b, err := api.CreateActivity(ctx, client.NewActivity{Title: "Journal club", Capacity: 80, Pools: []string{pool.ID}})
	require.NoError(t, err)
	sc.pool, sc.series, sc.activity, sc.other = pool.ID, series.ID, a.ID, b.ID
	_, err = api.CreateBlock(ctx, a.ID, client.NewBlock{Seats: 1, Role: "speaker"})
	require.NoError(t, err)
	for i, user := range []string{"ana", "ben", "cyd", "dee", "eve"} {
		res, err := inst.Signup(t, a.ID, user, client.SignupOptions{Seats: 1 + i%2})
		require.NoError(t, err, user)
		if i == 0 {
			sc.registration = res.Registration.ID
		}
	}
	for _, user := range []string{"fay", "gus"} {
		inst.MustSignup(t, b.ID, user)
	}
	list, err := api.CreateCheckinList(ctx, client.NewCheckinList{Name: "Main door", ActivityIDs: []string{a.ID, b.ID},
		Entry: client.EntryReentry, DoorRoles: []string{"door-main"}})
	require.NoError(t, err)
	sc.list = list.ID
	_, err = api.Redeem(ctx, list.ID, client.RedeemRequest{RegistrationID: sc.registration, Type: client.ScanEntry, Device: "door-1"}, "")
	require.NoError(t, err)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(receiver.Close)
	hook, err := api.CreateWebhook(ctx, client.NewWebhook{URL: receiver.URL + "/hooks/capacityd", Events: []string{"*"}})
	require.NoError(t, err)
	sc.webhook = hook.ID
	sc.ended, _ = endedActivity(t, inst)
	return sc
}

// TestConsoleDocsPictures takes the pictures of docs/console.md: every
// page in English and Traditional Chinese, in a headless chromium, into
// docs/console/ (make console-docs). It needs Chinese fonts (Debian:
// apt-get install fonts-noto-cjk).
func TestConsoleDocsPictures(t *testing.T) {
	if os.Getenv("UPDATE_DOCS") == "" {
		t.Skip("takes the pictures of docs/console.md: UPDATE_DOCS=1 (make console-docs)")
	}
	out, err := exec.Command("fc-list", ":lang=zh-tw").Output()
	require.NoError(t, err)
	require.NotEmpty(t, strings.TrimSpace(string(out)), "no Traditional Chinese font: apt-get install fonts-noto-cjk")
	var opts app.Options
	opts.WebhookGuard.AllowPrivate = true
	inst := apptest.Start(t, apptest.Options{App: opts})
	sc := newDocScene(t, inst)
	dir := filepath.Join(testenv.ModuleRoot(t), "docs", "console")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, lang := range docLangs {
		s := signInTab(t, inst, lang, "olivia", "admin")
		do(t, s.ctx, 10*time.Second, chromedp.EmulateViewport(1100, 820))
		for _, p := range docPages {
			s.open(p.path(sc))
			png, err := chromedp.Run(s.ctx, chromedp.CaptureScreenshot())
			require.NoError(t, err, p.name)
			require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s.%s.png", p.name, lang)), png, 0o644))
		}
	}
}

// TestConsoleDoc: docs/console.md shows the picture of every page in
// every language of the pictures, the pictures exist, and it shows no
// other.
func TestConsoleDoc(t *testing.T) {
	t.Parallel()
	var pictures []string
	for _, p := range docPages {
		for _, lang := range docLangs {
			pictures = append(pictures, p.name+"."+lang+".png")
		}
	}
	requirePictureDoc(t, "console", pictures, "make console-docs")
}

// requirePictureDoc checks docs/<dir>.md against its pictures: it shows
// each of them (docs/<dir>/<name>), each exists (take names them), and it
// shows no other.
func requirePictureDoc(t *testing.T, dir string, pictures []string, take string) {
	t.Helper()
	root := testenv.ModuleRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", dir+".md"))
	require.NoError(t, err)
	doc := string(b)
	for _, p := range pictures {
		require.Contains(t, doc, "("+dir+"/"+p+")", "docs/%s.md shows %s", dir, p)
		_, err := os.Stat(filepath.Join(root, "docs", dir, p))
		require.NoError(t, err, "take the pictures with "+take)
	}
	for _, m := range regexp.MustCompile(`\(`+dir+`/([^)]+\.png)\)`).FindAllStringSubmatch(doc, -1) {
		require.Contains(t, pictures, m[1], "docs/%s.md shows a picture no test takes", dir)
	}
}
