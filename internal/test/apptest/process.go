package apptest

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/test/launch"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// Binary builds cmd/capacityd with the race detector once per test
// process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	testenv.SkipShort(t, "a build of capacityd")
	bin, err := launch.Build(context.Background(), launch.BuildOptions{Race: true})
	if err != nil {
		t.Fatalf("apptest: %v", err)
	}
	return bin
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers, for capturing
// the output or logs of a service under test.
type SyncBuffer = launch.Output

// Process is capacityd running as a real process (capacityd serve), for
// tests of signals and shutdown.
type Process struct {
	URL  string
	proc *launch.Process
	auth *httpapi.Authenticator
}

// StartProcess runs `capacityd serve` on a free port against databaseURL
// and redisURL ("" for no display tier), with extra environment entries
// (NAME=value), and waits until it is healthy. It is killed when t ends if
// still running.
func StartProcess(t testing.TB, databaseURL, redisURL string, env ...string) *Process {
	t.Helper()
	return StartProcessAt(t, "", databaseURL, redisURL, env...)
}

// StartProcessAt is StartProcess listening on addr (host:port), for an
// instance restarted where a proxy expects it.
func StartProcessAt(t testing.TB, addr, databaseURL, redisURL string, env ...string) *Process {
	t.Helper()
	testenv.SkipShort(t, "capacityd as a process on PostgreSQL")
	out := &launch.Output{}
	proc, err := launch.Start(context.Background(), launch.Config{
		Binary: Binary(t), Addr: addr, Output: out,
		Env: append([]string{"DATABASE_URL=" + databaseURL, "REDIS_URL=" + redisURL, "CAPACITY_JWT_SECRET=" + Secret}, env...),
	})
	if err != nil {
		t.Fatalf("apptest: %v", err)
	}
	t.Cleanup(func() {
		proc.Kill()
		if t.Failed() {
			t.Logf("capacityd output:\n%s", out.String())
		}
	})
	auth, _ := httpapi.NewAuthenticator([]byte(Secret))
	return &Process{URL: proc.URL, proc: proc, auth: auth}
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
	if err := p.proc.Signal(sig); err != nil {
		t.Fatalf("apptest: signal: %v", err)
	}
}

// Wait waits up to timeout for the process to exit and returns its exit
// code (-1 if it did not exit in time).
func (p *Process) Wait(timeout time.Duration) int { return p.proc.Wait(timeout) }

// Output returns what the process wrote so far.
func (p *Process) Output() string { return p.proc.Output() }
