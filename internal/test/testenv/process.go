package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Require fails t when a dependency of its own is missing, saying how to
// install it: a check is never skipped and reported as passing.
func Require(t T, ok bool, what string) {
	t.Helper()
	if !ok {
		t.Fatalf("testenv: %s is required: install it (make test installs the Debian packages when run as root)", what)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitPort waits until addr accepts connections.
func waitPort(addr string, timeout time.Duration) error {
	return waitPortOrExit(addr, nil, time.Now().Add(timeout))
}

// process is a server process a test can kill and start again.
type process struct {
	t    T
	name string
	argv []string
	cred *syscall.Credential
	// env is added to the test's environment.
	env  []string
	addr string
	// logPath is where its output goes; empty: a new temporary file.
	logPath string

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when cmd has exited.
	exited <-chan struct{}
}

func (p *process) start() error {
	if err := p.launch(); err != nil {
		return err
	}
	return waitPort(p.addr, 30*time.Second)
}

// startAgain launches the process and waits for its port, as start does;
// a process that exits before its port opens is launched again, until a
// minute has passed: a PostgreSQL started again right after a crash
// refuses to run while a backend of the killed one still holds the
// shared memory, which a loaded machine can make last longer than kill
// waits for.
func (p *process) startAgain() error {
	deadline := time.Now().Add(time.Minute)
	for {
		if err := p.launch(); err != nil {
			return err
		}
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		err := waitPortOrExit(p.addr, exited, deadline)
		if !errors.Is(err, errExited) || time.Now().After(deadline) {
			return err
		}
		p.mu.Lock()
		p.cmd = nil
		p.mu.Unlock()
		time.Sleep(200 * time.Millisecond)
	}
}

// errExited: the process exited before its port opened.
var errExited = errors.New("exited before it accepted connections")

// waitPortOrExit waits until addr accepts connections, exited is closed
// (errExited; a nil exited never is) or the deadline passes.
func waitPortOrExit(addr string, exited <-chan struct{}, deadline time.Time) error {
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s: %w", addr, errExited)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not accept connections by the deadline: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// launch starts the process, not waiting for its port.
func (p *process) launch() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred}
	if len(p.env) > 0 {
		cmd.Env = append(os.Environ(), p.env...)
	}
	var logf *os.File
	var err error
	if p.logPath != "" {
		logf, err = os.OpenFile(p.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	} else {
		logf, err = os.CreateTemp("", "capacityd-"+p.name+"-*.log")
	}
	if err == nil {
		cmd.Stdout, cmd.Stderr = logf, logf
		defer logf.Close()
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.cmd, p.exited = cmd, exited
	return nil
}

// running reports whether the process was started and not stopped since.
func (p *process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// kill stops the process at once (SIGKILL), like a crash.
func (p *process) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	for range 200 {
		c, err := net.DialTimeout("tcp", p.addr, 50*time.Millisecond)
		if err != nil {
			break
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	// And until every process of its group is gone: a PostgreSQL backend
	// that outlives its postmaster by a moment (a loaded machine) still
	// holds the shared memory, and a start then fails with "pre-existing
	// shared memory block is still in use".
	for range 500 {
		if err := syscall.Kill(-p.cmd.Process.Pid, 0); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.cmd = nil
}

// stop asks the process to stop with sig and waits for its port to close.
func (p *process) stop(sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(cmd.Process.Pid, sig)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.kill()
}

// abandon kills a process that failed to start (SIGKILL to its group)
// without waiting for its port: another process may hold it.
func (p *process) abandon() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.cmd = nil
	}
}

// pid returns the process's id, 0 when it is not running.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// errPortTaken says that the port a server was given was taken by another
// process between FreePort and the server's bind.
var errPortTaken = errors.New("its port was taken by another process")

// startRedis starts redis-server processes on fresh free ports (those
// mk builds with the ports it is given) until one listens on its own: a
// port FreePort found free can be taken by a parallel test before the
// server binds it, and the server exits while the other process answers
// on its port.
func startRedis(t T, mk func(port int) *RedisServer) *RedisServer {
	t.Helper()
	for attempt := 1; ; attempt++ {
		r := mk(FreePort(t))
		err := r.p.start()
		if err == nil {
			err = r.ownsPort()
		}
		if err == nil {
			return r
		}
		r.p.abandon()
		if attempt == 5 {
			t.Fatalf("testenv: redis-server on %s: %v", r.Addr, err)
		}
	}
}

// ownsPort checks that the redis-server answering on the server's port is
// the server's own process.
func (r *RedisServer) ownsPort() error {
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DialTimeout: 2 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("%w: %w", errPortTaken, err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok && v == strconv.Itoa(r.p.pid()) {
			return nil
		}
	}
	return errPortTaken
}

// RedisServer is a private redis-server process with no persistence.
type RedisServer struct {
	p *process
	// Addr is host:port.
	Addr string
}

// URL returns the server's redis:// URL.
func (r *RedisServer) URL() string { return "redis://" + r.Addr + "/0" }

// Kill stops the server at once (its data is gone: nothing persists).
func (r *RedisServer) Kill() { r.p.kill() }

// Running reports whether the server was started and not killed since.
func (r *RedisServer) Running() bool { return r.p.running() }

// Start starts the server again on the same port.
func (r *RedisServer) Start(t T) {
	t.Helper()
	if err := r.p.start(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// PrivateRedis starts a redis-server of the test's own on a free port,
// killed when t ends.
func PrivateRedis(t T) *RedisServer {
	t.Helper()
	SkipShort(t, "a private redis-server")
	bin, err := exec.LookPath("redis-server")
	Require(t, err == nil, "redis-server")
	r := startRedis(t, func(port int) *RedisServer { return redisOn(t, "redis", bin, port) })
	t.Cleanup(r.Kill)
	return r
}

// redisOn returns, not started, a redis-server (the binary bin) without
// persistence on port of 127.0.0.1, with extra arguments; name names it in
// errors.
func redisOn(t T, name, bin string, port int, extra ...string) *RedisServer {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	argv := append([]string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--protected-mode", "no"}, extra...)
	return &RedisServer{Addr: addr, p: &process{t: t, name: name, addr: addr, argv: argv}}
}

// PostgresServer is a private PostgreSQL cluster on a free port.
type PostgresServer struct {
	p   *process
	dir string
	// URL is the connection string of its "postgres" database.
	URL string
}

// Stop shuts the cluster down fast (SIGINT: connections are cut).
func (s *PostgresServer) Stop() { s.p.stop(syscall.SIGINT) }

// Kill stops the cluster at once, like a crash.
func (s *PostgresServer) Kill() { s.p.kill() }

// DataDir is the cluster's data directory.
func (s *PostgresServer) DataDir() string { return filepath.Join(s.dir, "data") }

// Start starts the cluster again on the same port.
func (s *PostgresServer) Start(t T) {
	t.Helper()
	if err := s.p.startAgain(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// postgresBinDir finds the newest installed PostgreSQL server binaries.
func postgresBinDir() string {
	if d := os.Getenv("TEST_PG_BINDIR"); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

// PrivatePostgres initialises and starts a PostgreSQL cluster of the
// test's own on a free port (as the postgres user when run as root),
// removed when t ends.
func PrivatePostgres(t T) *PostgresServer {
	t.Helper()
	SkipShort(t, "a private PostgreSQL server")
	bin := postgresBinDir()
	Require(t, bin != "", "PostgreSQL server binaries (initdb, postgres)")
	dir, err := os.MkdirTemp("", "capacityd-pg-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cred := postgresCredential(t, dir)
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("testenv: initdb: %v\n%s", err, out)
	}
	port := FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s := &PostgresServer{dir: dir, URL: fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", addr)}
	s.p = &process{t: t, name: "postgres", addr: addr, cred: cred, argv: []string{
		filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=100",
	}}
	s.Start(t)
	// Accepting TCP is not yet accepting queries: wait for a real answer.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		pool := Pool(t, s.URL, 1)
		if err := pool.Ping(ctx); err == nil {
			pool.Close()
			break
		}
		pool.Close()
		if ctx.Err() != nil {
			t.Fatalf("testenv: private PostgreSQL did not answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(s.Kill)
	return s
}

// killWorkingIn kills (SIGKILL) every process whose working directory is
// dir or below it, as PostgreSQL's processes work in their data
// directory, even those that left the process group.
func killWorkingIn(dir string) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, d := range procs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", d.Name(), "cwd"))
		if err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator))) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
