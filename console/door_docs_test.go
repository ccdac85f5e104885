package console_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// doorDocLangs are the languages of docs/door.md's pictures.
var doorDocLangs = []string{"en", "zh-TW"}

// doorDocStates are the states of the door page that docs/door.md shows:
// docs/door/<state>.<lang>.png.
var doorDocStates = []string{"ready", "entered", "already", "revoked", "exited", "search", "walkin", "offline", "conflict", "room-full",
	"camera", "forget"}

// TestDoorDocsPictures takes the pictures of docs/door.md in a headless
// chromium, at a phone's size: every state of the door page in English
// and Traditional Chinese, into docs/door/ and the artifacts (make
// door-docs: UPDATE_DOCS=1). It needs Chinese fonts (Debian: apt-get
// install fonts-noto-cjk).
func TestDoorDocsPictures(t *testing.T) {
	if os.Getenv("UPDATE_DOCS") == "" {
		t.Skip("takes the pictures of docs/door.md: UPDATE_DOCS=1 (make door-docs)")
	}
	t.Parallel()
	out, err := exec.Command("fc-list", ":lang=zh-tw").Output()
	require.NoError(t, err, "fc-list (fontconfig) tells whether a Chinese font is installed")
	require.NotEmpty(t, strings.TrimSpace(string(out)), "no zh-tw font: install one (Debian: apt-get install fonts-noto-cjk)")
	docDir := filepath.Join(testenv.ModuleRoot(t), "docs", "door")
	artDir := filepath.Join(testenv.ArtifactsDir(t), t.Name())
	require.NoError(t, os.MkdirAll(artDir, 0o755))
	require.NoError(t, os.MkdirAll(docDir, 0o755))
	inst := apptest.Start(t, apptest.Options{})
	for _, lang := range doorDocLangs {
		s := signInTab(t, inst, lang, "dan", "door-a")
		do(t, s.ctx, doorWait, chromedp.EmulateViewport(430, 900))
		shootIn := func(s *session, state, sel string) {
			t.Helper()
			var png []byte
			var err error
			if sel == "" {
				png, err = chromedp.Run(s.ctx, chromedp.CaptureScreenshot())
			} else {
				png, err = chromedp.Run(s.ctx, chromedp.Screenshot(chromedp.CSS(sel)))
			}
			require.NoError(t, err, state)
			name := state + "." + lang + ".png"
			require.NoError(t, os.WriteFile(filepath.Join(artDir, name), png, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(docDir, name), png, 0o644))
		}
		shoot := func(state, sel string) { shootIn(s, state, sel) }
		ev, user := doorDocShots(t, inst, s, shoot)
		doorDocCamera(t, inst, ev, user, lang, func(c *session, state string) { shootIn(c, state, "") })
	}
}

// doorDocCamera pictures the door page scanning with a phone's camera (a
// browser whose fake camera plays a video of the ticket's QR code).
func doorDocCamera(t *testing.T, inst *apptest.Instance, ev doorEvent, user, lang string, shoot func(*session, string)) {
	t.Helper()
	video := filepath.Join(t.TempDir(), "ticket.y4m")
	writeTicketVideo(t, inst, ev, user, video)
	s := cameraTab(t, inst, video, lang, "dan", "door-a")
	do(t, s.ctx, doorWait, chromedp.EmulateViewport(430, 900))
	s.doorOpen(ev.list.ID, "hall-a-2")
	s.doorReady()
	do(t, s.ctx, doorWait,
		chromedp.Click("#camera-toggle"),
		waitTrue(`document.getElementById('result').dataset.outcome === 'entered'`, doorWait, "the camera's scan"),
		void(chromedp.Evaluate[bool](`document.getElementById('camera').scrollIntoView({block: 'center'}); true`)))
	shoot(s, "camera")
}

// doorDocShots drives a door through the states of docs/door.md, calling
// shoot in each (sel: the element to picture, "" for the screen), and
// returns the event and a user whose ticket is not yet used at its door,
// for the camera.
func doorDocShots(t *testing.T, inst *apptest.Instance, s *session, shoot func(state, sel string)) (doorEvent, string) {
	t.Helper()
	hundred := 120
	ev := newDoorEvent(t, inst, 20, client.NewCheckinList{Name: "Hall A, main door", MaxInside: &hundred},
		"alice", "bob", "carol", "dave", "erin")
	tickets := map[string]string{}
	for u := range ev.regs {
		tickets[u] = doorTicket(t, inst, ev, u)
	}
	doorCancel(t, inst, ev, "bob")
	top := void(chromedp.Evaluate[bool](`window.scrollTo(0, 0); document.activeElement.blur(); true`))
	s.doorOpen(ev.list.ID, "hall-a-1")
	s.doorReady()
	do(t, s.ctx, doorWait, top)
	shoot("ready", "")
	s.doorWedge(tickets["alice"])
	shoot("entered", "")
	s.doorWedge(tickets["alice"])
	shoot("already", "")
	s.doorWedge(tickets["bob"])
	shoot("revoked", "")
	s.doorMode("exit")
	s.doorWedge(tickets["alice"])
	do(t, s.ctx, doorWait, top)
	shoot("exited", "")
	s.doorMode("entry")

	do(t, s.ctx, doorWait,
		void(chromedp.Evaluate[bool](`document.getElementById('find').open = true; true`)),
		chromedp.SetValue("#search-user", "carol"),
		chromedp.Click(`#search button[type="submit"]`),
		waitTrue(`document.querySelectorAll('#search-results li').length === 1`, doorWait, "carol found"))
	shoot("search", "#find")
	do(t, s.ctx, doorWait, void(chromedp.Evaluate[bool](`document.getElementById('find').open = false;
		document.getElementById('walkin-tool').open = true; document.getElementById('walkin-user').value = 'walt'; true`)))
	shoot("walkin", "#walkin-tool")
	do(t, s.ctx, doorWait, void(chromedp.Evaluate[bool](`document.getElementById('walkin-tool').open = false; true`)))

	s.doorNetwork(false)
	s.doorWaitOnline(false)
	s.doorWedge(tickets["carol"])
	doorCancel(t, inst, ev, "dave")
	s.doorWedge(tickets["dave"])
	s.doorQueue(2)
	do(t, s.ctx, doorWait, top)
	shoot("offline", "")
	s.doorNetwork(true)
	s.doorQueue(0)
	do(t, s.ctx, doorWait,
		waitTrue(`!!document.querySelector('#attention-list li[data-conflict="ticket_revoked"]')`, doorWait, "the conflict"),
		void(chromedp.Evaluate[bool](`document.getElementById('attention').scrollIntoView({block: 'center'}); true`)))
	shoot("conflict", "")

	one := 1
	room, err := inst.API(t, "admin", true).CreateCheckinList(t.Context(), client.NewCheckinList{Name: "Room 101", ActivityIDs: []string{ev.activity},
		MaxInside: &one, DoorRoles: []string{"door-a"}})
	require.NoError(t, err)
	s.doorNavigate(room.ID)
	s.doorWedge(tickets["erin"])
	r := s.doorWedge(tickets["carol"])
	require.Equal(t, "room_full", r.Reason, r)
	do(t, s.ctx, doorWait, top)
	shoot("room-full", "")

	do(t, s.ctx, doorWait, void(chromedp.Evaluate[bool](`document.getElementById('settings').open = true;
		document.getElementById('forget').scrollIntoView({block: 'center'}); true`)))
	shoot("forget", "")
	return ev, "erin"
}

// TestDoorDoc checks docs/door.md against the pictures: it shows every
// state in every language, each picture exists (make door-docs takes
// them), and it shows no picture that no test takes; docs/README.md and
// docs/doors.md link to it.
func TestDoorDoc(t *testing.T) {
	t.Parallel()
	var pictures []string
	for _, state := range doorDocStates {
		for _, lang := range doorDocLangs {
			pictures = append(pictures, state+"."+lang+".png")
		}
	}
	requirePictureDoc(t, "door", pictures, "make door-docs")
	root := testenv.ModuleRoot(t)
	for _, from := range []string{"README.md", "doors.md"} {
		b, err := os.ReadFile(filepath.Join(root, "docs", from))
		require.NoError(t, err)
		require.Contains(t, string(b), "(door.md)", "docs/%s links to door.md", from)
	}
}
