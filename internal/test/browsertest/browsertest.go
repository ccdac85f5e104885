// Package browsertest drives the one headless chromium of a test package
// (chromedp): the pages and widgets that capacityd serves are tested in a
// browser. A package's TestMain calls Run; each test opens its own Tab.
package browsertest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// browserCtx is the package's browser; nil when chromium is not installed.
var browserCtx context.Context

// Run starts chromium, runs the package's tests and returns their exit
// code. Without chromium the tests run anyway, and every Tab fails saying
// how to install it; under -short chromium is not started, and every Tab
// skips its test.
func Run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	path, err := exec.LookPath("chromium")
	if err != nil {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "capacityd-chromium-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(dir),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// No back-forward cache: a page navigated away from would keep its
		// seat streams open, and a browser opens at most six connections to
		// a server of HTTP/1.1 (the tests' servers).
		chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,BackForwardCache"),
		chromedp.WindowSize(1000, 800),
		// The browser's own language is English whatever the machine's
		// locale; the tests set the page's language where it matters.
		chromedp.Flag("lang", "en-US"),
		chromedp.Env("LANGUAGE=en_US", "LANG=en_US.UTF-8"),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	// Start the browser now, on a context without a deadline.
	if err := chromedp.Do(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "start chromium:", err)
		return 1
	}
	browserCtx = ctx
	return m.Run()
}

// Tab opens a browser tab for t, closed when t ends. Without chromium the
// test fails (it skips only under -short): pages and widgets are only
// tested in a browser.
func Tab(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("drives chromium: not under -short")
	}
	if browserCtx == nil {
		t.Fatal("chromium is not installed: install it with `apt-get install -y chromium` (Debian; make test and .ci/run do)")
	}
	ctx, cancel := chromedp.NewContext(browserCtx)
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(900, 720)))
	return ctx
}

// PrivateTab opens a browser tab for t in a browser context of its own
// (cookies, storage and cache of its own, like a private window), closed
// when t ends: the tests' servers all listen on 127.0.0.1, and cookies
// do not tell ports apart, so the sessions of parallel tests would
// otherwise overwrite each other.
func PrivateTab(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("drives chromium: not under -short")
	}
	if browserCtx == nil {
		t.Fatal("chromium is not installed: install it with `apt-get install -y chromium` (Debian; make test and .ci/run do)")
	}
	ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(900, 720)))
	return ctx
}

// Do runs the steps within d.
func Do(t *testing.T, ctx context.Context, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// WaitText waits until the element's text is want.
func WaitText(sel, want string, within time.Duration) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(document.querySelector(%q) || {}).textContent === %q`, sel, want)
	return WaitTrue(js, within, fmt.Sprintf("%s to read %q", sel, want))
}

// WaitAttr waits until the element's attribute attr is want.
func WaitAttr(sel, attr, want string, within time.Duration) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(document.querySelector(%q) || {getAttribute() { return null }}).getAttribute(%q) === %q`, sel, attr, want)
	return WaitTrue(js, within, fmt.Sprintf("%s's %s to be %q", sel, attr, want))
}

// WaitTrue waits until the expression js is true; what says what it
// waits for, in the error of a wait that timed out.
func WaitTrue(js string, within time.Duration, what string) chromedp.Action[chromedp.Void] {
	p := Void(chromedp.Poll[bool](js, chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(10*time.Millisecond)))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := p(ctx, t)
		if err != nil {
			err = fmt.Errorf("waiting for %s: %w", what, err)
		}
		return chromedp.Void{}, err
	}
}

// Void drops an action's value.
func Void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}

// Text returns the element's text.
func Text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).textContent`, sel)))
	require.NoError(t, err)
	return s
}

// Screenshot saves the tab's viewport as artifacts/<test name>.png and
// returns it.
func Screenshot(t *testing.T, ctx context.Context) []byte {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	dir := testenv.ArtifactsDir(t)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)
	return png
}

// Count returns the number of elements sel matches.
func Count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	require.NoError(t, err)
	return n
}
