package testenv

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// HAProxy is an HAProxy of the test's own in front of service instances,
// configured as docs/deploy.md shows: health checks on /readyz,
// X-Forwarded-For added, timeouts that let seat streams live, and
// retries on another instance of the requests an instance refused or
// dropped unanswered.
type HAProxy struct {
	p    *process
	sock string
	// URL is the proxy's http:// address.
	URL string
}

// StartHAProxy starts haproxy (Debian's package) on a free loopback port
// in front of the instances at backends (host:port each), and waits until
// it accepts connections. It is killed when t ends.
func StartHAProxy(t T, backends ...string) *HAProxy {
	t.Helper()
	bin := systemTool("haproxy")
	Require(t, bin != "", "haproxy (Debian package haproxy)")
	dir := t.TempDir()
	port := FreePort(t)
	h := &HAProxy{sock: filepath.Join(dir, "admin.sock"), URL: "http://127.0.0.1:" + strconv.Itoa(port)}
	cfg := filepath.Join(dir, "haproxy.cfg")
	write(t, cfg, haproxyConfig(port, h.sock, backends))
	if out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("testenv: haproxy -c: %v\n%s", err, out)
	}
	h.p = &process{t: t, name: "haproxy", addr: "127.0.0.1:" + strconv.Itoa(port), argv: []string{bin, "-db", "-f", cfg}}
	if err := h.p.start(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(h.p.kill)
	return h
}

// haproxyConfig is the proxy's configuration. Every request takes a
// connection of its own to an instance (http-server-close), so that an
// instance that stops refuses new requests instead of dropping one on a
// kept-alive connection; a refused request, or one whose connection
// closed without an answer, is sent again to another instance (retry-on,
// redispatch).
func haproxyConfig(port int, sock string, backends []string) string {
	var servers strings.Builder
	for i, b := range backends {
		fmt.Fprintf(&servers, "  server s%d %s check\n", i, b)
	}
	return fmt.Sprintf(`global
  maxconn 4000
  stats socket %s mode 600 level admin

defaults
  mode http
  timeout connect 1s
  timeout client 60s
  timeout server 60s
  timeout tunnel 1h
  timeout http-request 10s
  timeout queue 5s
  timeout check 2s
  option forwardfor
  option http-server-close
  option redispatch 1
  retries 3
  retry-on conn-failure empty-response

frontend web
  bind 127.0.0.1:%d
  default_backend capacityd

backend capacityd
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter 200ms fall 2 rise 1
%s`, sock, port, servers.String())
}

// stats returns the proxy's statistics of the instances' backend, one
// row of CSV fields (pxname, svname, ..., wretr, wredis, status, ...) per
// server and one for the backend as a whole.
func (h *HAProxy) stats(t T) [][]string {
	t.Helper()
	conn, err := net.DialTimeout("unix", h.sock, time.Second)
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
		if f := strings.Split(sc.Text(), ","); len(f) > 17 && f[0] == "capacityd" {
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
