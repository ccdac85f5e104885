package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// runScript prepares `scripts/run.sh` (what make run runs) with the race
// build of capacityd, a fresh database, state kept in state, and extra
// environment entries.
func runScript(ctx context.Context, t *testing.T, state, databaseURL string, env ...string) *exec.Cmd {
	t.Helper()
	script, err := filepath.Abs("../../scripts/run.sh")
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Env = append(os.Environ(), "CAPACITYD_BIN="+apptest.Binary(t), "CAPACITYD_STATE="+state,
		"DATABASE_URL="+databaseURL, "REDIS_URL=", "CAPACITY_JWT_SECRET=", "LISTEN_ADDR=")
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

func TestMakeRunRefusesATakenPortWithoutBanner(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := runScript(ctx, t, t.TempDir(), testenv.NewDatabase(t), "LISTEN_ADDR=127.0.0.1:"+port).CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "port "+port+" on 127.0.0.1 is already in use")
	require.NotContains(t, string(out), "capacityd is running")
	require.NotContains(t, string(out), "curl")
}

func TestMakeRunReportsCapacitydExiting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	out, err := runScript(ctx, t, t.TempDir(), testenv.NewDatabase(t), "LISTEN_ADDR="+addr, "SEAT_CACHE_TTL=soon").CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "SEAT_CACHE_TTL")
	require.Contains(t, string(out), "capacityd exited (status 2) before it was healthy")
	require.NotContains(t, string(out), "capacityd is running")
}

// TestMakeRunReusesTheDemoActivity runs make run twice on one database:
// it serves on loopback with a secret of its own, the demo page shows a
// pool shared by two activities, and the second run shows the demo
// activity and the pool of the first.
func TestMakeRunReusesTheDemoActivity(t *testing.T) {
	t.Parallel()
	state, db := t.TempDir(), testenv.NewDatabase(t)
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	demo := regexp.MustCompile(`/demo\?activity=(a_[0-9A-Za-z]+)&waitlist=a_[0-9A-Za-z]+&pool=(p_[0-9A-Za-z]+)&note=demo-note`)
	var ids, pools []string
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		cmd := runScript(ctx, t, state, db, "LISTEN_ADDR="+addr)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		logs := &apptest.SyncBuffer{}
		cmd.Stderr = logs
		require.NoError(t, cmd.Start())
		var banner strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			banner.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(strings.TrimSpace(sc.Text()), "curl -N") {
				break
			}
		}
		m := demo.FindStringSubmatch(banner.String())
		require.NotNil(t, m, "banner:\n%s\nlogs:\n%s", banner.String(), logs.String())
		ids = append(ids, m[1])
		pools = append(pools, m[2])
		require.Contains(t, banner.String(), "running on http://"+addr)
		link := regexp.MustCompile(`console: +(http://\S+/console/link/\S+)`).FindStringSubmatch(banner.String())
		require.NotNil(t, link, "banner:\n%s", banner.String())
		require.True(t, strings.HasPrefix(link[1], "http://"+addr+"/console/link/"))
		require.Equal(t, http.StatusSeeOther, statusOf(t, link[1]), "the console link signs in")
		require.Equal(t, http.StatusUnauthorized, statusOf(t, link[1]), "once")
		var pool client.Pool
		r, err := apptest.Do(http.MethodGet, "http://"+addr+"/v1/pools/"+m[2], "", nil)
		require.NoError(t, err)
		r.JSON(t, &pool)
		require.Equal(t, "Main hall", pool.Title)
		require.Len(t, pool.Activities, 2, "two activities share the demo pool")
		r, err = apptest.Do(http.MethodGet, "http://"+addr+m[0], "", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status)
		for _, id := range pool.Activities {
			require.Contains(t, string(r.Body), `<div class="seats" data-seats-activity="`+id+`">`)
		}
		require.Contains(t, string(r.Body), " share the 30 seats of Main hall: ")
		require.Contains(t, logs.String(), `"addr":"`+addr+`"`, "bound to loopback")
		require.NotContains(t, logs.String(), "--dev", "not the public development secret")
		require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM))
		_ = cmd.Wait()
		cancel()
	}
	require.Equal(t, ids[0], ids[1], "the demo activity is reused")
	require.Equal(t, pools[0], pools[1], "the demo pool is reused")
	secret, err := os.ReadFile(filepath.Join(state, "dev-secret"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(secret), 32)
	require.NotContains(t, string(secret), devSecret)
}

// statusOf is the status of a GET of u, redirects not followed.
func statusOf(t *testing.T, u string) int {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}
