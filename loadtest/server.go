package loadtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// BuildCapacityd builds cmd/capacityd into dir and returns the binary's
// path. It must run inside the module.
func BuildCapacityd(ctx context.Context, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("loadtest: %w", err)
	}
	bin := filepath.Join(dir, "capacityd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/physiciansnet/capacityd/cmd/capacityd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("loadtest: build capacityd: %w\n%s", err, out)
	}
	return bin, nil
}

// ServerConfig is how to run a capacityd for the scenarios.
type ServerConfig struct {
	Binary      string
	DatabaseURL string
	RedisURL    string
	Secret      string
	// Env adds NAME=value settings (e.g. NOTE_COMBINING=off).
	Env []string
}

// benchEnv keeps background work and rate limits out of the measurements:
// expiry, reconciliation and the webhook backlog refresh would add
// transactions to the counts (the seat-read scenario counts every
// transaction of the bench database), and rate limits would refuse the
// load. The webhook scenario creates its webhooks on this instance, which
// starts delivering at once without a refresh.
var benchEnv = []string{
	"EXPIRY_INTERVAL=1h", "RECONCILE_INTERVAL=1h", "WEBHOOK_BACKLOG_INTERVAL=1h",
	"RATE_LIMIT_PUBLIC_WRITES=0", "RATE_LIMIT_PUBLIC_READS=0", "RATE_LIMIT_SIGNUPS=0", "NOTE_WATER_WINDOW=0s",
	// The stream scenario opens its 1,000 streams from one address.
	"STREAM_MAX_PER_ADDRESS=0",
	// The scenarios read /metrics on the service's address.
	"METRICS_ADDR=api",
	// signup_hot_webhooks delivers to a receiver on the loopback interface.
	"WEBHOOK_ALLOW_PRIVATE=true", "WEBHOOK_SECRET_KEY=" + benchWebhookKey,
}

// benchWebhookKey seals the webhook secrets of the capacityd the load test
// starts (a throwaway key for a throwaway service).
const benchWebhookKey = "bG9hZHRlc3Qtd2ViaG9vay1rZXktMzItYnl0ZXMhISE="

// Server is a capacityd process started by the load test.
type Server struct {
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
	out  *tailBuffer
}

// StartServer runs `capacityd serve` on a free loopback port and waits
// until /readyz answers 200.
func StartServer(ctx context.Context, c ServerConfig) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(c.Binary, "serve")
	cmd.Env = append(os.Environ(), benchEnv...)
	cmd.Env = append(cmd.Env, "DATABASE_URL="+c.DatabaseURL, "REDIS_URL="+c.RedisURL,
		"LISTEN_ADDR="+addr, "CAPACITY_JWT_SECRET="+c.Secret)
	cmd.Env = append(cmd.Env, c.Env...)
	out := &tailBuffer{max: 64 * 1024}
	cmd.Stdout, cmd.Stderr = out, out
	// The service dies with the load test, however that ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("loadtest: start capacityd: %w", err)
	}
	s := &Server{URL: "http://" + addr, cmd: cmd, done: make(chan struct{}), out: out}
	go func() { _ = cmd.Wait(); close(s.done) }()
	if err := s.waitReady(ctx, 60*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("loadtest: capacityd exited at start:\n%s", s.out.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("loadtest: capacityd not ready within %s:\n%s", timeout, s.out.String())
		}
	}
}

// Stop sends SIGTERM, waits up to 20 s, then kills the process.
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Output returns the end of what the process wrote.
func (s *Server) Output() string { return s.out.String() }

// Exited reports whether the process has ended.
func (s *Server) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// PID returns the process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("loadtest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
