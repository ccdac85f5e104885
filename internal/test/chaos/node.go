package chaos

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/launch"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// Binary builds cmd/capacityd with the given build tags (none: the
// release build) once per test process and returns its path.
func Binary(t testing.TB, tags ...string) string {
	t.Helper()
	testenv.SkipShort(t, "a build of capacityd")
	bin, err := launch.Build(context.Background(), launch.BuildOptions{Tags: tags})
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	return bin
}

// Node is one capacityd instance run as a real process on a fixed port,
// which a test can kill (SIGKILL) and start again on the same port.
type Node struct {
	Name string
	URL  string
	cfg  launch.Config // Addr fixed: every run listens at URL

	// mu keeps a start and a kill of the node apart.
	mu   sync.Mutex
	proc *launch.Process
	runs atomic.Int64
}

// StartNode starts `capacityd serve` from bin with env (NAME=value
// entries) on a free loopback port and waits until it is healthy. It is
// killed when t ends.
func StartNode(t testing.TB, name, bin string, env ...string) *Node {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	n := &Node{Name: name, URL: "http://" + addr, cfg: launch.Config{Binary: bin, Addr: addr, Output: &launch.Output{},
		Env: append([]string{"CAPACITY_JWT_SECRET=" + apptest.Secret}, env...)}}
	t.Cleanup(func() {
		n.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, n.cfg.Output.Tail(8000))
		}
	})
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	return n
}

// Start starts the process (again) and waits until /healthz answers.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		return nil
	}
	n.runs.Add(1)
	p, err := launch.Start(context.Background(), n.cfg)
	if err != nil {
		return fmt.Errorf("chaos: %s: %w", n.Name, err)
	}
	n.proc = p
	return nil
}

// Kill stops the process at once with SIGKILL, like a crash, and waits
// for it to exit.
func (n *Node) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		n.proc.Kill()
		n.proc = nil
	}
}

// Instance names the node's current run, e.g. "n0#2" for its second.
func (n *Node) Instance() string {
	return n.Name + "#" + strconv.FormatInt(n.runs.Load(), 10)
}

// Output returns what the node's processes wrote so far.
func (n *Node) Output() string { return n.cfg.Output.String() }
