package testenv

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestRenderDeployFileReplacesEveryPlaceholder(t *testing.T) {
	t.Parallel()
	text := "# ${A} in a comment stays\n; so here\nbind ${A}\n  server a ${X}\n  server b ${Y}\nport = ${B}\n"
	out, err := renderDeployFile(text, map[string]string{"A": "1.2.3.4:80", "X": "h:1", "B": "6432"})
	require.NoError(t, err)
	require.Equal(t, "# ${A} in a comment stays\n; so here\nbind 1.2.3.4:80\n  server a h:1\nport = 6432\n", out,
		"the server line of an instance not given is left out")

	_, err = renderDeployFile(text, map[string]string{"A": "x", "X": "h:1"})
	require.ErrorContains(t, err, "no value for B")
	_, err = renderDeployFile(text, map[string]string{"A": "x", "B": "1", "TYPO": "y"})
	require.ErrorContains(t, err, "no place for TYPO")
}

// envsubstNames are the names of the envsubst command a file's header
// gives.
var envsubstNames = regexp.MustCompile(`envsubst '([^']+)'`)

// TestDeployFilesHeadersListTheirPlaceholders checks that the envsubst
// command of each file's header names every placeholder of the file, and
// only those: an operator who follows the header renders the whole file.
func TestDeployFilesHeadersListTheirPlaceholders(t *testing.T) {
	t.Parallel()
	for _, rel := range []string{"haproxy/haproxy.cfg", "pgbouncer/pgbouncer.ini"} {
		b, err := os.ReadFile(deployPath(t, rel))
		require.NoError(t, err)
		m := envsubstNames.FindStringSubmatch(string(b))
		require.NotNil(t, m, "%s: the header gives the envsubst command", rel)
		var listed []string
		for _, f := range strings.Fields(m[1]) {
			listed = append(listed, strings.TrimPrefix(f, "$"))
		}
		var used []string
		for line := range strings.Lines(string(b)) {
			if l := strings.TrimSpace(line); strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";") {
				continue
			}
			for _, p := range placeholder.FindAllStringSubmatch(line, -1) {
				used = append(used, p[1])
			}
		}
		slices.Sort(listed)
		slices.Sort(used)
		require.Equal(t, listed, slices.Compact(used), rel)
	}
}

// TestPgBouncerOfTheDeployFileAuthenticatesAndShowsPools starts the
// pooler of deploy/pgbouncer/pgbouncer.ini: a wrong password is refused,
// the right one passes, and the stats user reads SHOW POOLS on the
// console, as docs/deploy.md's diagnosis of a small pool does.
func TestPgBouncerOfTheDeployFileAuthenticatesAndShowsPools(t *testing.T) {
	t.Parallel()
	b := PrivatePgBouncer(t, DatabaseURL(), 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	conn, err := pgx.Connect(ctx, b.URL(DatabaseURL()))
	require.NoError(t, err)
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	require.NoError(t, conn.Close(ctx))

	wrong, err := pgx.ParseConfig(b.URL(DatabaseURL()))
	require.NoError(t, err)
	wrong.Password = "wrong"
	_, err = pgx.ConnectConfig(ctx, wrong)
	require.ErrorContains(t, err, "authentication failed")

	console, err := pgx.Connect(ctx, b.StatsURL())
	require.NoError(t, err)
	defer console.Close(ctx)
	rows, err := console.Query(ctx, "SHOW POOLS")
	require.NoError(t, err)
	var modes []string
	for rows.Next() {
		vals, err := rows.Values()
		require.NoError(t, err)
		modes = append(modes, vals[len(vals)-1].(string))
	}
	require.NoError(t, rows.Err())
	require.Contains(t, modes, "transaction", "the pool of the database, in transaction mode")
	_, err = console.Exec(ctx, "PAUSE")
	require.ErrorContains(t, err, "admin access needed", "the stats user only reads")

	admin, err := pgx.Connect(ctx, b.AdminURL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "RELOAD")
	require.NoError(t, err, "the admin user administers")
	require.Contains(t, b.Log(t), "login attempt", "the pooler logs to its logfile")
}
