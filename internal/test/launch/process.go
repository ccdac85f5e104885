package launch

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// Config is how to run a capacityd process.
type Config struct {
	// Binary is the capacityd to run (see Build).
	Binary string
	// Args are its arguments; none: serve.
	Args []string
	// Addr is where it listens (LISTEN_ADDR), host:port; empty: a free
	// port on 127.0.0.1. Process.Config has it set, so that a process
	// started again from it listens where it did.
	Addr string
	// Env adds NAME=value settings, after this process's environment and
	// the launcher's own: LISTEN_ADDR, and METRICS_ADDR=api (/metrics on
	// the process's address, and no two processes contending for the
	// default metrics port), which Env may set otherwise.
	Env []string
	// Output receives what the process writes; nil: a new, unbounded
	// Output. Runs started from one Config share it.
	Output *Output
	// ReadyPath is the route that must answer 200 before Start returns;
	// empty: /healthz.
	ReadyPath string
	// ReadyWithin bounds the wait for ReadyPath; zero: 60 s.
	ReadyWithin time.Duration
	// DieWithParent has the process sent SIGTERM when the one that started
	// it ends, however that ends.
	DieWithParent bool
}

// Process is a running (or ended) capacityd.
type Process struct {
	// URL is http://Addr.
	URL  string
	cfg  Config
	cmd  *exec.Cmd
	done chan struct{}
}

// readyPoll is how often Start asks whether the process is ready.
const readyPoll = 50 * time.Millisecond

// startOutputTail bounds how much of the output an error of Start quotes.
const startOutputTail = 16 << 10

// Start runs capacityd as c says and waits until c.ReadyPath answers 200.
// When the process exits first, the wait runs out or ctx ends, it kills
// the process and returns an error that quotes the end of its output.
func Start(ctx context.Context, c Config) (*Process, error) {
	if c.Addr == "" {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		c.Addr = "127.0.0.1:" + strconv.Itoa(port)
	}
	if c.Output == nil {
		c.Output = &Output{}
	}
	if len(c.Args) == 0 {
		c.Args = []string{"serve"}
	}
	c.ReadyPath = cmp.Or(c.ReadyPath, "/healthz")
	c.ReadyWithin = cmp.Or(c.ReadyWithin, 60*time.Second)

	cmd := exec.Command(c.Binary, c.Args...)
	cmd.Env = slices.Concat(os.Environ(), []string{"LISTEN_ADDR=" + c.Addr, "METRICS_ADDR=api"}, c.Env)
	cmd.Stdout, cmd.Stderr = c.Output, c.Output
	if c.DieWithParent {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("launch: start capacityd: %w", err)
	}
	p := &Process{URL: "http://" + c.Addr, cfg: c, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	if err := p.waitReady(ctx); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

func (p *Process) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(p.cfg.ReadyWithin)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+p.cfg.ReadyPath, nil)
		if err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("launch: capacityd exited at start:\n%s", p.cfg.Output.Tail(startOutputTail))
		case <-ctx.Done():
			return fmt.Errorf("launch: capacityd not ready: %w", ctx.Err())
		case <-time.After(readyPoll):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("launch: capacityd not ready within %s:\n%s", p.cfg.ReadyWithin, p.cfg.Output.Tail(startOutputTail))
		}
	}
}

// Config returns the configuration the process runs with, its Addr and
// Output set: Start(ctx, p.Config()) runs it again on the same address,
// writing to the same Output.
func (p *Process) Config() Config { return p.cfg }

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill ends the process at once with SIGKILL, like a crash, and waits for
// it to exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM, waits up to grace for the process to exit, then
// kills it.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Wait waits up to timeout for the process to exit and returns its exit
// code (-1 if it did not exit in time, or was ended by a signal).
func (p *Process) Wait(timeout time.Duration) int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		return -1
	}
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Output returns what is kept of what the process wrote so far (with the
// runs before it that shared its Output).
func (p *Process) Output() string { return p.cfg.Output.String() }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("launch: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
