package testenv

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// PgBouncer is a PgBouncer of the test's own in transaction pooling mode,
// in front of a PostgreSQL server, with its ini and user list in a
// temporary folder.
type PgBouncer struct {
	p *process
	// Addr is host:port.
	Addr string
	// PoolSize is the number of server connections per database and
	// user.
	PoolSize int
}

// URL returns the connection string of a database through the pooler, as
// a user would write it: the direct URL with the pooler's address.
func (b *PgBouncer) URL(directURL string) string {
	u, err := url.Parse(directURL)
	if err != nil {
		panic(err)
	}
	u.Host = b.Addr
	return u.String()
}

// Kill stops the pooler at once.
func (b *PgBouncer) Kill() { b.p.kill() }

// systemTool finds a command of a Debian package, also in /usr/sbin
// (which a non-root PATH may lack), or returns "".
func systemTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := filepath.Join("/usr/sbin", name); isExecutable(p) {
		return p
	}
	return ""
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&0o111 != 0
}

// PrivatePgBouncer starts a pgbouncer (Debian's package, as the postgres
// user when run as root: it refuses to run as root) on a free port, in
// transaction pooling mode with poolSize server connections, in front of
// the server of directURL: every database of that server is reachable
// through it under its own name. settings are more lines of its
// [pgbouncer] section ("name = value"). It is killed when t ends.
func PrivatePgBouncer(t T, directURL string, poolSize int, settings ...string) *PgBouncer {
	t.Helper()
	bin := systemTool("pgbouncer")
	Require(t, bin != "", "pgbouncer (Debian package pgbouncer)")
	server, err := url.Parse(directURL)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	dir, err := os.MkdirTemp("", "capacityd-pgbouncer-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	port := FreePort(t)
	b := &PgBouncer{Addr: "127.0.0.1:" + strconv.Itoa(port), PoolSize: poolSize}
	ini := filepath.Join(dir, "pgbouncer.ini")
	write(t, ini, pgbouncerIni(server, dir, port, poolSize)+strings.Join(settings, "\n")+"\n")
	password, _ := server.User.Password()
	write(t, filepath.Join(dir, "userlist.txt"), fmt.Sprintf("%q %q\n", server.User.Username(), password))
	cred := postgresCredential(t, dir)
	b.p = &process{t: t, name: "pgbouncer", addr: b.Addr, cred: cred, argv: []string{bin, ini}}
	if err := b.p.start(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(b.Kill)
	return b
}

// pgbouncerIni is the pooler's configuration: transaction pooling, trust
// between the test and the pooler, the server's own authentication
// between the pooler and the server, and PgBouncer's defaults otherwise
// (in particular no ignore_startup_parameters).
func pgbouncerIni(server *url.URL, dir string, port, poolSize int) string {
	conn := []string{"host=" + server.Hostname(), "port=" + cmpOr(server.Port(), "5432"), "user=" + server.User.Username()}
	if pw, ok := server.User.Password(); ok {
		conn = append(conn, "password="+pw)
	}
	return fmt.Sprintf(`[databases]
* = %s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 2000
max_db_connections = %d
logfile = %s
pidfile = %s
admin_users = %s
`, strings.Join(conn, " "), port, filepath.Join(dir, "userlist.txt"), poolSize, poolSize,
		filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"), server.User.Username())
}

// postgresCredential returns the credential of the postgres system user
// when run as root (and gives it dir), nil otherwise.
func postgresCredential(t T, dir string) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	Require(t, err == nil, "a postgres system user to run a server as root")
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, uid, gid)
	}); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

func write(t T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
