package chaos

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/physiciansnet/capacityd/internal/apptest"
	"github.com/physiciansnet/capacityd/internal/testenv"
)

var builds sync.Map // build tags → *build

type build struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// Binary builds cmd/capacityd with the given build tags (none: the
// release build) once per test process and returns its path.
func Binary(t testing.TB, tags ...string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(strings.Join(tags, ","), &build{})
	b := v.(*build)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "capacityd-chaos-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "capacityd")
		args := []string{"build", "-o", b.path}
		if len(tags) > 0 {
			args = append(args, "-tags", strings.Join(tags, ","))
		}
		cmd := exec.Command("go", append(args, "github.com/physiciansnet/capacityd/cmd/capacityd")...)
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("chaos: build capacityd %v: %v\n%s", tags, b.err, b.out)
	}
	return b.path
}

// Node is one capacityd instance run as a real process on a fixed port,
// which a test can kill (SIGKILL) and start again on the same port.
type Node struct {
	Name string
	URL  string
	bin  string
	env  []string
	out  *apptest.SyncBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	runs int
}

// StartNode starts `capacityd serve` from bin with env (NAME=value
// entries) on a free loopback port and waits until it is healthy. It is
// killed when t ends.
func StartNode(t testing.TB, name, bin string, env ...string) *Node {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	n := &Node{Name: name, URL: "http://" + addr, bin: bin, out: &apptest.SyncBuffer{},
		// METRICS_ADDR=api: /metrics on the node's address, and no two
		// nodes contending for the default metrics port.
		env: append(append(os.Environ(), "LISTEN_ADDR="+addr, "CAPACITY_JWT_SECRET="+apptest.Secret, "METRICS_ADDR=api"), env...)}
	t.Cleanup(func() {
		n.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tail(n.out.String(), 8000))
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
	if n.cmd != nil {
		n.mu.Unlock()
		return nil
	}
	n.runs++
	cmd := exec.Command(n.bin, "serve")
	cmd.Env = n.env
	cmd.Stdout, cmd.Stderr = n.out, n.out
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		return fmt.Errorf("chaos: start %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := apptest.Do(http.MethodGet, n.URL+"/healthz", "", nil)
		if err == nil && r.Status == http.StatusOK {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("chaos: %s exited at start:\n%s", n.Name, tail(n.out.String(), 4000))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: %s not healthy within 60s:\n%s", n.Name, tail(n.out.String(), 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill stops the process at once with SIGKILL, like a crash, and waits
// for it to exit.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Instance names the node's current run, e.g. "n0#2" for its second.
func (n *Node) Instance() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.Name + "#" + strconv.Itoa(n.runs)
}

// Output returns what the node's processes wrote so far.
func (n *Node) Output() string { return n.out.String() }

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
