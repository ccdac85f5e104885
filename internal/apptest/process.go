package apptest

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/testenv"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

// Binary builds cmd/capacityd once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "capacityd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "capacityd")
		cmd := exec.Command("go", "build", "-race", "-o", binPath, "github.com/physiciansnet/capacityd/cmd/capacityd")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("apptest: build capacityd: %v\n%s", buildErr, buildOut)
	}
	return binPath
}

// Process is capacityd running as a real process (capacityd serve), for
// tests of signals and shutdown.
type Process struct {
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
	out  *SyncBuffer
	auth *httpapi.Authenticator
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers, for capturing
// the output or logs of a service under test.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// StartProcess runs `capacityd serve` on a free port against databaseURL
// and redisURL ("" for no display tier), with extra environment entries
// (NAME=value), and waits until it is healthy. It is killed when t ends if
// still running.
func StartProcess(t testing.TB, databaseURL, redisURL string, env ...string) *Process {
	t.Helper()
	return StartProcessAt(t, "127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)), databaseURL, redisURL, env...)
}

// StartProcessAt is StartProcess listening on addr (host:port), for an
// instance restarted where a proxy expects it.
func StartProcessAt(t testing.TB, addr, databaseURL, redisURL string, env ...string) *Process {
	t.Helper()
	bin := Binary(t)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+databaseURL, "REDIS_URL="+redisURL, "LISTEN_ADDR="+addr,
		"CAPACITY_JWT_SECRET="+Secret,
		// /metrics on the instance's own address (tests read it there),
		// and no two instances contending for the default metrics port.
		"METRICS_ADDR=api")
	cmd.Env = append(cmd.Env, env...)
	out := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("apptest: start capacityd: %v", err)
	}
	auth, _ := httpapi.NewAuthenticator([]byte(Secret))
	p := &Process{URL: "http://" + addr, cmd: cmd, done: make(chan struct{}), out: out, auth: auth}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("capacityd output:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := Do(http.MethodGet, p.URL+"/healthz", "", nil)
		if err == nil && r.Status == http.StatusOK {
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("apptest: capacityd exited at start:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("apptest: capacityd not healthy within 60s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Token returns a valid token for sub.
func (p *Process) Token(t testing.TB, sub string, admin bool) string {
	t.Helper()
	tok, err := p.auth.Sign(sub, admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Signal sends sig to the process.
func (p *Process) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("apptest: signal: %v", err)
	}
}

// Wait waits up to timeout for the process to exit and returns its exit
// code (-1 if it did not exit in time).
func (p *Process) Wait(timeout time.Duration) int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		return -1
	}
}

// Output returns what the process wrote so far.
func (p *Process) Output() string { return p.out.String() }
