package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// TestMigrateDirectlyThenServeThroughPgBouncer is the deployment behind a
// transaction pooler: migrations go straight to PostgreSQL (their lock is
// a session's, which transaction pooling does not keep), and instances
// whose DATABASE_URL is the pooler's, as a user writes it, start without
// migrating and serve.
func TestMigrateDirectlyThenServeThroughPgBouncer(t *testing.T) {
	t.Parallel()
	direct := testenv.EmptyDatabase(t)
	bouncer := testenv.PrivatePgBouncer(t, testenv.DatabaseURL(), 4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	migrate := exec.CommandContext(ctx, apptest.Binary(t), "migrate")
	migrate.Env = append(os.Environ(), "DATABASE_URL="+direct)
	out, err := migrate.CombinedOutput()
	require.NoError(t, err, "%s", out)

	pooled := bouncer.URL(direct)
	var procs []*apptest.Process
	for range 2 {
		procs = append(procs, apptest.StartProcess(t, pooled, testenv.RedisURL(), "MIGRATE_ON_START=false"))
	}
	r, err := apptest.Do(http.MethodPost, procs[0].URL+"/v1/activities", procs[0].Token(t, "admin", true), `{"title":"pooled","capacity":3}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var a struct{ ID string }
	r.JSON(t, &a)
	for i, user := range []string{"ann", "bob", "cyd", "dan"} {
		p := procs[i%2]
		r, err = apptest.Do(http.MethodPost, p.URL+"/v1/activities/"+a.ID+"/registrations", p.Token(t, user, false), `{}`)
		require.NoError(t, err)
		want := http.StatusCreated
		if i == 3 {
			want = http.StatusConflict
		}
		require.Equal(t, want, r.Status, "%s", r.Body)
	}
	for _, p := range procs {
		r, err = apptest.Do(http.MethodGet, p.URL+"/readyz", "", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.NotContains(t, p.Output(), "migrations applied")
		require.NotContains(t, p.Output(), "prepared statement")
	}
}

// TestServeAndMigrateRefuseToMigrateThroughPgBouncer starts serve with
// the default MIGRATE_ON_START, and runs migrate, with DATABASE_URL the
// pooler's (PgBouncer in transaction mode): both stop at once, without
// retrying, saying to migrate against the server directly; nothing is
// applied.
func TestServeAndMigrateRefuseToMigrateThroughPgBouncer(t *testing.T) {
	t.Parallel()
	direct := testenv.EmptyDatabase(t)
	bouncer := testenv.PrivatePgBouncer(t, testenv.DatabaseURL(), 4)
	for _, args := range [][]string{{"serve"}, {"migrate"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, apptest.Binary(t), args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+bouncer.URL(direct), "REDIS_URL=",
			"CAPACITY_JWT_SECRET="+apptest.Secret, "LISTEN_ADDR=127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)))
		start := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s: %s", args, out)
		require.Equal(t, 2, exit.ExitCode(), "%s", out)
		require.Less(t, time.Since(start), 20*time.Second, "%s stops at once: waiting does not change the pooler", args)
		require.Contains(t, string(out), "DATABASE_URL ("+bouncer.Addr+") reaches PostgreSQL through a pooler: the pooler does not keep a server session per client")
		require.Contains(t, string(out), "run capacityd migrate ")
		require.Contains(t, string(out), "the PostgreSQL server", "%s", out)
		if args[0] == "serve" {
			require.Contains(t, string(out), "MIGRATE_ON_START=false")
			require.NotContains(t, string(out), "retrying")
		}
	}
	pool := testenv.Pool(t, direct, 1)
	var migrated bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&migrated))
	require.False(t, migrated, "nothing applied")
}
