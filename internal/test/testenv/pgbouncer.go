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
// in front of a PostgreSQL server, running deploy/pgbouncer/pgbouncer.ini
// with its user list, pid file, socket and log in a temporary folder.
type PgBouncer struct {
	p   *process
	dir string
	// Addr is host:port.
	Addr string
	// passwords are those of the user list, by user.
	passwords map[string]string
}

// The console's users of deploy/pgbouncer/pgbouncer.ini.
const (
	pgbouncerAdmin = "pgbouncer_admin"
	pgbouncerStats = "pgbouncer_stats"
)

// URL returns the connection string of a database through the pooler, as
// a user would write it: the direct URL with the pooler's address and
// the user's password of the pooler's user list.
func (b *PgBouncer) URL(directURL string) string {
	u, err := url.Parse(directURL)
	if err != nil {
		panic(err)
	}
	u.Host = b.Addr
	name := u.User.Username()
	u.User = url.UserPassword(name, b.passwords[name])
	return u.String()
}

// StatsURL returns the connection string of the pooler's console as its
// stats user (SHOW POOLS, SHOW STATS), in the simple query protocol,
// which is all the console speaks.
func (b *PgBouncer) StatsURL() string { return b.consoleURL(pgbouncerStats) }

// AdminURL returns the connection string of the pooler's console as its
// admin user (PAUSE, RELOAD, ...).
func (b *PgBouncer) AdminURL() string { return b.consoleURL(pgbouncerAdmin) }

func (b *PgBouncer) consoleURL(user string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, b.passwords[user]), Host: b.Addr, Path: "/pgbouncer",
		RawQuery: "sslmode=disable&default_query_exec_mode=simple_protocol"}
	return u.String()
}

// Log returns what the pooler logged so far.
func (b *PgBouncer) Log(t T) string {
	t.Helper()
	out, err := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("testenv: %v", err)
	}
	return string(out)
}

// Kill stops the pooler at once.
func (b *PgBouncer) Kill() { b.p.kill() }

// Start starts the pooler again with the same configuration, on the same
// port.
func (b *PgBouncer) Start(t T) {
	t.Helper()
	if err := b.p.start(); err != nil {
		t.Fatalf("testenv: %v\n%s", err, b.Log(t))
	}
}

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

// PrivatePgBouncer starts a pgbouncer (Debian's package) with
// deploy/pgbouncer/pgbouncer.ini on a free port in front of the server of
// directURL: every database of that server is reachable through it under
// its own name, by the user of directURL with the password of directURL
// (a random one when it has none), and by the console's users. A
// poolSize above 0 adds two lines to its [pgbouncer] section, for a pool
// of poolSize server connections (default_pool_size, max_db_connections);
// settings ("name = value") come after them. Both win over the file's. Run as root, it runs as the
// postgres user (-u postgres), as docs/deploy.md says: PgBouncer refuses
// to run as root. It is killed when t ends.
func PrivatePgBouncer(t T, directURL string, poolSize int, settings ...string) *PgBouncer {
	t.Helper()
	SkipShort(t, "a private PgBouncer")
	bin := systemTool("pgbouncer")
	Require(t, bin != "", "pgbouncer (Debian package pgbouncer)")
	server, err := url.Parse(directURL)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	// Not t.TempDir: the postgres user must reach it, and a Unix socket's
	// path must be short.
	dir, err := os.MkdirTemp("", "capacityd-pgbouncer-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	port := FreePort(t)
	b := &PgBouncer{dir: dir, Addr: "127.0.0.1:" + strconv.Itoa(port), passwords: map[string]string{}}
	user := server.User.Username()
	password, ok := server.User.Password()
	if !ok {
		password = randomHex(12)
	}
	b.passwords[user] = password
	b.passwords[pgbouncerAdmin] = randomHex(12)
	b.passwords[pgbouncerStats] = randomHex(12)

	ini := deployFile(t, "pgbouncer/pgbouncer.ini", map[string]string{
		"PGBOUNCER_ADDR":     "127.0.0.1",
		"PGBOUNCER_PORT":     strconv.Itoa(port),
		"POSTGRES_HOST":      server.Hostname(),
		"POSTGRES_PORT":      cmpOr(server.Port(), "5432"),
		"PGBOUNCER_CONF_DIR": dir,
		"PGBOUNCER_LOG_DIR":  dir,
		"PGBOUNCER_RUN_DIR":  dir,
	})
	var extra []string
	if poolSize > 0 {
		extra = append(extra, "; the test's pool",
			fmt.Sprintf("default_pool_size = %d", poolSize), fmt.Sprintf("max_db_connections = %d", poolSize))
	}
	extra = append(extra, settings...)
	iniPath := filepath.Join(dir, "pgbouncer.ini")
	write(t, iniPath, ini+strings.Join(extra, "\n")+"\n")
	var users strings.Builder
	for _, name := range []string{user, pgbouncerAdmin, pgbouncerStats} {
		fmt.Fprintf(&users, "%q %q\n", name, b.passwords[name])
	}
	write(t, filepath.Join(dir, "userlist.txt"), users.String())

	argv := []string{bin, iniPath}
	if postgresCredential(t, dir) != nil { // root: the folder is the postgres user's now
		argv = []string{bin, "-u", "postgres", iniPath}
	}
	b.p = &process{t: t, name: "pgbouncer", addr: b.Addr, argv: argv}
	if err := b.p.start(); err != nil {
		t.Fatalf("testenv: %v\n%s", err, b.Log(t))
	}
	t.Cleanup(b.Kill)
	return b
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
