package testenv

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// HAProxy is an HAProxy of the test's own in front of service instances,
// running deploy/haproxy/haproxy.cfg, the configuration docs/deploy.md
// shows: health checks on /readyz, X-Forwarded-For added, timeouts that
// let seat streams live, retries on another instance of the requests an
// instance refused or dropped unanswered, its own answers in the API's
// JSON error shape, /metrics and /demo refused, a log line per request.
type HAProxy struct {
	p   *process
	log string
	// URL is the proxy's http:// address.
	URL string
	// AdminSocket is the path of its runtime API (level admin).
	AdminSocket string
	// Backend is the name of the instances' backend, and Servers the
	// names of the instances in it, in the order StartHAProxy was given
	// them.
	Backend string
	Servers []string
}

// haproxyServers are the names of the instances of
// deploy/haproxy/haproxy.cfg and the placeholders of their addresses.
var haproxyServers = []struct{ name, placeholder string }{{"a", "INSTANCE_A"}, {"b", "INSTANCE_B"}, {"c", "INSTANCE_C"}}

// StartHAProxy starts haproxy (Debian's package) with
// deploy/haproxy/haproxy.cfg on a free loopback port (plain HTTP) in
// front of the instances at backends (host:port each, at most three:
// those the file lists), and waits until it accepts connections. It is
// killed when t ends.
func StartHAProxy(t T, backends ...string) *HAProxy {
	t.Helper()
	SkipShort(t, "a private HAProxy")
	bin := systemTool("haproxy")
	Require(t, bin != "", "haproxy (Debian package haproxy)")
	if len(backends) == 0 || len(backends) > len(haproxyServers) {
		t.Fatalf("testenv: deploy/haproxy/haproxy.cfg runs 1 to %d instances, not %d", len(haproxyServers), len(backends))
	}
	dir := t.TempDir()
	port := FreePort(t)
	h := &HAProxy{
		log: filepath.Join(dir, "haproxy.log"), URL: "http://127.0.0.1:" + strconv.Itoa(port),
		AdminSocket: filepath.Join(dir, "admin.sock"), Backend: "capacityd",
	}
	vars := map[string]string{
		"PUBLIC_BIND":        "127.0.0.1:" + strconv.Itoa(port),
		"HAPROXY_RUN_DIR":    dir,
		"HAPROXY_ERRORS_DIR": deployPath(t, "haproxy/errors"),
	}
	for i, b := range backends {
		vars[haproxyServers[i].placeholder] = b
		h.Servers = append(h.Servers, haproxyServers[i].name)
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	write(t, cfg, deployFile(t, "haproxy/haproxy.cfg", vars))
	if out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("testenv: haproxy -c: %v\n%s", err, out)
	}
	h.p = &process{t: t, name: "haproxy", addr: "127.0.0.1:" + strconv.Itoa(port), logPath: h.log, argv: []string{bin, "-db", "-f", cfg}}
	if err := h.p.start(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(h.p.kill)
	// The listener can answer before the admin socket exists: wait for it
	// too, so that the first look at the statistics finds it.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(h.AdminSocket); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("testenv: haproxy admin socket %s did not appear: %v", h.AdminSocket, err)
		}
	}
	return h
}

// Kill stops the proxy at once (SIGKILL), like a crash.
func (h *HAProxy) Kill() { h.p.kill() }

// Start starts the proxy again with the same configuration, on the same
// port; its instances are checked anew before it sends them requests.
func (h *HAProxy) Start(t T) {
	t.Helper()
	if err := h.p.start(); err != nil {
		t.Fatalf("testenv: %v\n%s", err, h.Log(t))
	}
}

// Log returns what the proxy logged so far (its requests, the changes of
// the instances' states).
func (h *HAProxy) Log(t T) string {
	t.Helper()
	b, err := os.ReadFile(h.log)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return string(b)
}

// stats returns the proxy's statistics of the instances' backend, one
// row of CSV fields (pxname, svname, ..., wretr, wredis, status, ...) per
// server and one for the backend as a whole.
func (h *HAProxy) stats(t T) [][]string {
	t.Helper()
	conn, err := net.DialTimeout("unix", h.AdminSocket, time.Second)
	if err != nil {
		t.Fatalf("testenv: haproxy admin socket: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("show stat\n")); err != nil {
		t.Fatalf("testenv: haproxy admin socket: %v", err)
	}
	var rows [][]string
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if f := strings.Split(sc.Text(), ","); len(f) > 17 && f[0] == h.Backend {
			rows = append(rows, f)
		}
	}
	return rows
}

// ServersUp returns the number of instances the proxy holds healthy.
func (h *HAProxy) ServersUp(t T) int {
	t.Helper()
	up := 0
	for _, f := range h.stats(t) {
		if f[1] != "BACKEND" && f[17] == "UP" {
			up++
		}
	}
	return up
}

// Retries returns how many times the proxy sent a request again
// (retries) and to another instance (redispatches).
func (h *HAProxy) Retries(t T) (retries, redispatches int) {
	t.Helper()
	for _, f := range h.stats(t) {
		if f[1] == "BACKEND" {
			retries, _ = strconv.Atoi(f[15])
			redispatches, _ = strconv.Atoi(f[16])
		}
	}
	return retries, redispatches
}

// WaitServersUp waits until the proxy holds n instances healthy.
func (h *HAProxy) WaitServersUp(t T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for h.ServersUp(t) != n {
		if time.Now().After(deadline) {
			t.Fatalf("testenv: haproxy holds %d instances up, not %d, after 30s", h.ServersUp(t), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Sessions returns the number of sessions the proxy has open on the
// instance it calls server (scur).
func (h *HAProxy) Sessions(t T, server string) int {
	t.Helper()
	for _, f := range h.stats(t) {
		if f[1] == server {
			n, _ := strconv.Atoi(f[4])
			return n
		}
	}
	t.Fatalf("testenv: haproxy has no server %q", server)
	return 0
}
