package console_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// Y4M video of a QR code: what a camera pointed at a ticket sees.
const (
	camWidth, camHeight = 640, 480
	camFrames, camFPS   = 10, 5
)

// writeTicketVideo writes a YUV4MPEG2 (4:2:0) video of a few seconds
// showing the ticket of user's registration as its owner downloads it
// (GET /v1/registrations/{id}/ticket.svg), drawn by chromium on white,
// still, as chromium's fake camera plays it (in a loop).
func writeTicketVideo(t *testing.T, inst *apptest.Instance, ev doorEvent, user, path string) {
	t.Helper()
	r := inst.MustDo(t, http.MethodGet, "/v1/registrations/"+ev.regs[user].ID+"/ticket.svg", inst.Token(t, user, false), nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.Contains(t, r.Header.Get("Content-Type"), "image/svg+xml")
	ctx := tab(t)
	src := "data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString(r.Body)
	do(t, ctx, doorWait,
		chromedp.EmulateViewport(camWidth, camHeight),
		chromedp.Navigate("about:blank"),
		void(chromedp.Evaluate[bool](fmt.Sprintf(`new Promise((resolve, reject) => {
			document.body.style.cssText = 'margin:0;background:#fff';
			const img = new Image();
			img.onload = () => resolve(true);
			img.onerror = () => reject(new Error('the ticket does not draw'));
			img.style.cssText = 'display:block;margin:20px auto;height:%dpx';
			img.src = %q;
			document.body.appendChild(img);
		})`, camHeight-40, src), chromedp.EvalAwaitPromise)))
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	pic, err := png.Decode(bytes.NewReader(shot))
	require.NoError(t, err)
	require.Equal(t, image.Rect(0, 0, camWidth, camHeight), pic.Bounds(), "the picture is the camera's size")
	luma := make([]byte, camWidth*camHeight)
	for y := range camHeight {
		for x := range camWidth {
			c := color.GrayModel.Convert(pic.At(x, y)).(color.Gray)
			luma[y*camWidth+x] = byte(16 + int(c.Y)*219/255) // video range
		}
	}
	chroma := make([]byte, camWidth*camHeight/2) // U and V planes, grey
	for i := range chroma {
		chroma[i] = 128
	}
	f, err := os.Create(path)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "YUV4MPEG2 W%d H%d F%d:1 Ip A1:1 C420jpeg\n", camWidth, camHeight, camFPS)
	for range camFrames {
		_, _ = w.WriteString("FRAME\n")
		_, _ = w.Write(luma)
		_, _ = w.Write(chroma)
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
}

// cameraBrowser starts a chromium of its own whose camera plays video,
// allowed without asking, and returns a tab of it.
func cameraBrowser(t *testing.T, video string) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("drives chromium: not under -short")
	}
	path, err := exec.LookPath("chromium")
	require.NoError(t, err, "chromium is not installed: install it with `apt-get install -y chromium`")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-features", "Translate,BackForwardCache"),
		chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.Flag("use-fake-ui-for-media-stream", true),
		chromedp.Flag("use-file-for-fake-video-capture", video),
		chromedp.WindowSize(1000, 800),
		chromedp.Flag("lang", "en-US"),
		chromedp.Env("LANGUAGE=en_US", "LANG=en_US.UTF-8"),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(900, 720)))
	return ctx
}

// cameraTab is signInTab in a browser of its own whose camera plays
// video.
func cameraTab(t *testing.T, inst *apptest.Instance, video, lang, sub string, roles ...string) *session {
	t.Helper()
	return signInWith(t, cameraBrowser(t, video), inst, lang, sub, roles...)
}

// TestDoorCameraScansOnce: the camera (chromium's fake camera playing a
// video of the ticket's QR code) checks the registration in, once, though
// the code stays in view.
func TestDoorCameraScansOnce(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ev := newDoorEvent(t, inst, 10, client.NewCheckinList{}, "alice")
	video := filepath.Join(t.TempDir(), "ticket.y4m")
	writeTicketVideo(t, inst, ev, "alice", video)
	s := cameraTab(t, inst, video, "en", "dan", "door-a")
	ctx := s.ctx
	s.doorOpen(ev.list.ID, "hall-a-cam")
	do(t, ctx, doorWait,
		chromedp.Click("#camera-toggle"),
		waitTrue(`document.getElementById('result').dataset.outcome === 'entered'`, doorWait, "the camera's scan to check alice in"),
	)
	r := s.doorShown()
	require.Equal(t, 1, r.Seq, r)
	require.Contains(t, r.Who, "alice")
	require.Equal(t, "jsqr", attr(t, ctx, "#camera", "data-decoder"), "chromium on Linux has no BarcodeDetector")

	// The code stays in view: seen again and again, redeemed once.
	seen := doorEval[int](s, `+document.getElementById('camera').dataset.sightings`)
	do(t, ctx, doorWait, waitTrue(fmt.Sprintf(`+document.getElementById('camera').dataset.sightings >= %d`, seen+15), doorWait,
		"the camera to see the code 15 times more"))
	require.Equal(t, 1, s.doorShown().Seq, "one scan")
	history := doorHistory(t, inst, ev.list.ID)
	require.Len(t, history, 1)
	require.Equal(t, "hall-a-cam", history[0].Device)

	do(t, ctx, doorWait, chromedp.Click("#camera-toggle"),
		waitTrue(`document.getElementById('camera').hidden && document.getElementById('camera-toggle').getAttribute('aria-pressed') === 'false'`,
			doorWait, "the camera to stop"))
}
