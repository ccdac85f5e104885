package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/store"
)

// AutoFailover is a pg_auto_failover formation of the test's own (Debian's
// package postgresql-15-auto-failover, command pg_autoctl): a monitor, and
// two PostgreSQL nodes, one primary and one standby, each run by its
// pg_autoctl keeper on a free loopback port, in a temporary folder. The
// standby is synchronous (it takes part in the write quorum) unless the
// formation was started with AutoFailoverOptions.Async: a commit is then
// acknowledged once it is on both nodes, and the monitor promotes the
// standby when the primary is lost.
//
// The monitor's health checks are tightened (a node is unhealthy after
// about two seconds without an answer, instead of twenty) so that a
// failover fits in a test; docs/deploy.md gives the defaults' costs.
type AutoFailover struct {
	t       T
	dir     string
	env     []string
	cred    *syscall.Credential
	monitor *process
	nodes   [2]*autoNode
	// Database is the name of the service's database on the nodes,
	// migrated.
	Database string
}

// autoNode is one PostgreSQL node of a formation and its keeper.
type autoNode struct {
	name   string
	port   int
	pgdata string
	p      *process
}

// AutoFailoverOptions choose how a formation replicates.
type AutoFailoverOptions struct {
	// Async leaves the standby out of the write quorum: commits are
	// acknowledged before they reach it, and a failover can lose them.
	Async bool
}

// autoctlBin finds pg_autoctl.
func autoctlBin() string { return systemTool("pg_autoctl") }

// monitorSettings shorten the monitor's failure detection for tests.
var monitorSettings = map[string]string{
	"pgautofailover.health_check_period":               "1000",
	"pgautofailover.health_check_retry_delay":          "500",
	"pgautofailover.health_check_timeout":              "1000",
	"pgautofailover.health_check_max_retries":          "1",
	"pgautofailover.node_considered_unhealthy_timeout": "2000",
	"pgautofailover.primary_demote_timeout":            "5000",
	"pgautofailover.startup_grace_period":              "5000",
}

// PrivateAutoFailover starts a formation (see AutoFailover) with a
// migrated database, waits until its primary and standby are in their
// states, and stops it when t ends. Run as root, every process runs as the
// postgres user: PostgreSQL refuses to run as root. When the test failed,
// the keepers' logs are copied to the artifacts folder.
func PrivateAutoFailover(t T, opts AutoFailoverOptions) *AutoFailover {
	t.Helper()
	SkipShort(t, "a private pg_auto_failover formation")
	bin := autoctlBin()
	Require(t, bin != "", "pg_autoctl (Debian package postgresql-15-auto-failover)")
	pgBin := postgresBinDir()
	Require(t, pgBin != "", "PostgreSQL server binaries (initdb, postgres)")
	dir, err := os.MkdirTemp("", "capacityd-paf-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	f := &AutoFailover{t: t, dir: dir, Database: "capacityd", cred: postgresCredential(t, dir)}
	f.env = []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"XDG_DATA_HOME=" + filepath.Join(dir, "share"), "PG_CONFIG=" + filepath.Join(pgBin, "pg_config")}
	t.Cleanup(func() {
		f.stopAll()
		f.keepLogs()
		_ = os.RemoveAll(dir)
	})
	pgctl := filepath.Join(pgBin, "pg_ctl")

	mport := FreePort(t)
	f.monitor = &process{t: t, name: "pg_autoctl-monitor", addr: addrOf(mport), cred: f.cred, env: f.env,
		logPath: filepath.Join(dir, "monitor.log"), argv: []string{bin, "create", "monitor", "--pgctl", pgctl,
			"--pgdata", filepath.Join(dir, "monitor"), "--pgport", strconv.Itoa(mport), "--hostname", "127.0.0.1",
			"--auth", "trust", "--no-ssl", "--run"}}
	if err := f.monitor.start(); err != nil {
		t.Fatalf("testenv: %v\n%s", err, f.logTail("monitor"))
	}
	f.monitor.argv = []string{bin, "run", "--pgdata", filepath.Join(dir, "monitor")}
	f.waitMonitor()

	quorum := "true"
	for i := range f.nodes {
		if i == 1 && opts.Async {
			quorum = "false"
		}
		n := &autoNode{name: fmt.Sprintf("node%d", i+1), port: FreePort(t)}
		n.pgdata = filepath.Join(dir, n.name)
		n.p = &process{t: t, name: "pg_autoctl-" + n.name, addr: addrOf(n.port), cred: f.cred, env: f.env,
			logPath: filepath.Join(dir, n.name+".log"), argv: []string{bin, "create", "postgres", "--pgctl", pgctl,
				"--pgdata", n.pgdata, "--pgport", strconv.Itoa(n.port), "--listen", "127.0.0.1", "--hostname", "127.0.0.1",
				"--name", n.name, "--auth", "trust", "--no-ssl", "--monitor", f.MonitorURL(), "--dbname", f.Database,
				"--replication-quorum", quorum, "--run"}}
		f.nodes[i] = n
		stopNudging := func() {}
		if i == 1 {
			// pg_basebackup waits for a spread checkpoint of the primary:
			// minutes, unless one is asked for.
			stopNudging = f.nudgeCheckpoints(f.nodes[0])
		}
		err := n.p.start()
		stopNudging()
		if err != nil {
			t.Fatalf("testenv: %v\n%s", err, f.logTail(n.name))
		}
		n.p.argv = []string{bin, "run", "--pgdata", n.pgdata}
		if i == 0 {
			f.waitStates(60*time.Second, "single")
		}
	}
	f.WaitHealthy(t, 90*time.Second)
	pool := Pool(t, f.URL(), 2)
	if _, err := store.Migrate(context.Background(), pool); err != nil {
		t.Fatalf("testenv: migrate the formation's database: %v", err)
	}
	pool.Close()
	return f
}

func addrOf(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// MonitorURL is the connection string of the monitor's database as the
// keepers use it.
func (f *AutoFailover) MonitorURL() string {
	return fmt.Sprintf("postgres://autoctl_node@%s/pg_auto_failover?sslmode=disable", f.monitor.addr)
}

// monitorAdminURL is the monitor's database as its superuser.
func (f *AutoFailover) monitorAdminURL() string {
	return fmt.Sprintf("postgres://postgres@%s/pg_auto_failover?sslmode=disable", f.monitor.addr)
}

// URL is the service's multi-host connection string: both nodes, the
// read-write one chosen at each connection (target_session_attrs).
func (f *AutoFailover) URL() string {
	return fmt.Sprintf("postgres://postgres@%s,%s/%s?sslmode=disable&target_session_attrs=read-write",
		f.nodes[0].p.addr, f.nodes[1].p.addr, f.Database)
}

// NodeURL is the connection string of node i (0 or 1) alone.
func (f *AutoFailover) NodeURL(i int) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", f.nodes[i].p.addr, f.Database)
}

// waitMonitor waits until the monitor's extension answers, then
// tightens its health checks.
func (f *AutoFailover) waitMonitor() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, f.monitorAdminURL())
		if err == nil {
			_, err = conn.Exec(ctx, `SELECT count(*) FROM pgautofailover.formation`)
			if err == nil {
				for name, v := range monitorSettings {
					if _, err = conn.Exec(ctx, fmt.Sprintf(`ALTER SYSTEM SET %s = '%s'`, name, v)); err != nil {
						break
					}
				}
			}
			if err == nil {
				_, err = conn.Exec(ctx, `SELECT pg_reload_conf()`)
			}
			conn.Close(ctx)
			if err == nil {
				return
			}
		}
		if ctx.Err() != nil {
			f.t.Fatalf("testenv: pg_auto_failover monitor not ready: %v\n%s", err, f.logTail("monitor"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nudgeCheckpoints asks node n for a checkpoint every second until the
// returned function is called.
func (f *AutoFailover) nudgeCheckpoints(n *autoNode) (stop func()) {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Second):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", n.p.addr)); err == nil {
				_, _ = conn.Exec(ctx, `CHECKPOINT`)
				conn.Close(ctx)
			}
			cancel()
		}
	}()
	return func() { close(done) }
}

// NodeState is a node as the monitor sees it.
type NodeState struct {
	Name     string
	Port     int
	Reported string
	Assigned string
}

// States returns the nodes as the monitor sees them, in node order.
func (f *AutoFailover) States(t T) []NodeState {
	t.Helper()
	out, err := f.states()
	if err != nil {
		t.Fatalf("testenv: pg_auto_failover monitor: %v", err)
	}
	return out
}

func (f *AutoFailover) states() ([]NodeState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.monitorAdminURL())
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT nodename, nodeport, reportedstate::text, goalstate::text
		FROM pgautofailover.node ORDER BY nodeid`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (NodeState, error) {
		var s NodeState
		err := r.Scan(&s.Name, &s.Port, &s.Reported, &s.Assigned)
		return s, err
	})
}

// waitStates waits until the monitor reports the nodes (in order) in
// the states want, each reached.
func (f *AutoFailover) waitStates(timeout time.Duration, want ...string) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	var last []NodeState
	var err error
	for time.Now().Before(deadline) {
		last, err = f.states()
		if err == nil && len(last) == len(want) {
			ok := true
			for i, s := range last {
				ok = ok && s.Reported == want[i] && s.Assigned == want[i]
			}
			if ok {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.t.Fatalf("testenv: pg_auto_failover did not reach %v within %s: %+v (%v)\n%s\n%s", want, timeout, last, err,
		f.logTail(f.nodes[0].name), f.logTail(f.nodes[1].name))
}

// WaitHealthy waits until one node is the primary and the other its
// standby (states primary and secondary, as assigned).
func (f *AutoFailover) WaitHealthy(t T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if st, err := f.states(); err == nil && len(st) == 2 {
			p, s := 0, 0
			for _, n := range st {
				switch {
				case n.Reported == "primary" && n.Assigned == "primary":
					p++
				case n.Reported == "secondary" && n.Assigned == "secondary":
					s++
				}
			}
			if p == 1 && s == 1 {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	st, err := f.states()
	t.Fatalf("testenv: pg_auto_failover not healthy within %s: %+v (%v)\n%s\n%s", timeout, st, err,
		f.logTail(f.nodes[0].name), f.logTail(f.nodes[1].name))
}

// Primary returns the index (0 or 1) of the node the monitor holds for
// the primary now (reported and assigned primary, wait_primary or single),
// or -1 when none is, after trying for ten seconds.
func (f *AutoFailover) Primary() int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, err := f.states(); err == nil {
			for _, n := range st {
				if n.Reported == n.Assigned && (n.Assigned == "primary" || n.Assigned == "wait_primary" || n.Assigned == "single") {
					for i := range f.nodes {
						if f.nodes[i].name == n.Name {
							return i
						}
					}
				}
			}
		}
		if time.Now().After(deadline) {
			return -1
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// KillPrimary kills the primary node's keeper and PostgreSQL at once
// (SIGKILL to their process group), like the loss of its machine, and
// returns its index. The node stays down until StartNode.
func (f *AutoFailover) KillPrimary(t T) int {
	t.Helper()
	i := f.Primary()
	if i < 0 {
		t.Fatalf("testenv: pg_auto_failover has no primary to kill")
	}
	f.KillNode(i)
	return i
}

// KillNode kills node i's keeper and PostgreSQL at once (SIGKILL to their
// process group). The node stays down until StartNode.
func (f *AutoFailover) KillNode(i int) { f.nodes[i].p.kill() }

// StopStandby stops the standby node (its keeper shuts its PostgreSQL
// down fast) and returns its index. The node stays down until StartNode.
func (f *AutoFailover) StopStandby(t T) int {
	t.Helper()
	p := f.Primary()
	if p < 0 {
		t.Fatalf("testenv: pg_auto_failover has no primary")
	}
	i := 1 - p
	f.nodes[i].p.stop(syscall.SIGINT)
	return i
}

// StartNode starts node i's keeper again: it rejoins the formation (as a
// standby, rewound if it was the primary; WaitHealthy waits for that), its
// PostgreSQL listening only once its recovery and rewind are done.
func (f *AutoFailover) StartNode(t T, i int) {
	t.Helper()
	if err := f.nodes[i].p.launch(); err != nil {
		t.Fatalf("testenv: %v\n%s", err, f.logTail(f.nodes[i].name))
	}
}

// Switchover asks the monitor for a planned switchover (pg_autoctl perform
// switchover) and waits until it is done: the standby is the primary, and
// the old primary its standby.
func (f *AutoFailover) Switchover(t T) {
	t.Helper()
	cmd := exec.Command(autoctlBin(), "perform", "switchover", "--monitor", f.MonitorURL(), "--wait", "120")
	cmd.Env = append(os.Environ(), f.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: f.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: pg_autoctl perform switchover: %v\n%s", err, out)
	}
	f.WaitHealthy(t, 60*time.Second)
}

// Logs returns what the monitor's and the nodes' keepers logged so far.
func (f *AutoFailover) Logs() string {
	var b strings.Builder
	for _, name := range []string{"monitor", f.nodes[0].name, f.nodes[1].name} {
		out, _ := os.ReadFile(filepath.Join(f.dir, name+".log"))
		fmt.Fprintf(&b, "==> %s <==\n%s\n", name, out)
	}
	return b.String()
}

// logTail returns the last lines of a keeper's log.
func (f *AutoFailover) logTail(name string) string {
	out, _ := os.ReadFile(filepath.Join(f.dir, name+".log"))
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "==> " + name + " <==\n" + strings.Join(lines, "\n")
}

// stopAll kills every process of the formation.
func (f *AutoFailover) stopAll() {
	for _, n := range f.nodes {
		if n != nil {
			n.p.kill()
		}
	}
	if f.monitor != nil {
		f.monitor.kill()
	}
	// PostgreSQL's children leave the process group (each starts a
	// session of its own), and the monitor's healthcheck worker outlives
	// its postmaster: whatever still works in the formation's data dies.
	killWorkingIn(f.dir)
}

// keepLogs copies the keepers' logs to the artifacts folder when the test
// failed.
func (f *AutoFailover) keepLogs() {
	ft, ok := f.t.(interface {
		Failed() bool
		Name() string
	})
	if !ok || !ft.Failed() {
		return
	}
	dir := filepath.Join(ArtifactsDir(f.t), "pg_auto_failover-"+strings.NewReplacer("/", "_", " ", "_").Replace(ft.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	_ = os.WriteFile(filepath.Join(dir, "keepers.log"), []byte(f.Logs()), 0o644)
}
