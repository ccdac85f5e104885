package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/apptest"
	"github.com/physiciansnet/capacityd/internal/testenv"
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
