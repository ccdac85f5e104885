package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// readWriteRole creates a login role that may only read and write the
// tables of the database at adminURL (SELECT, INSERT, UPDATE, DELETE, and
// USAGE on its sequences: no DDL), dropped when t ends, and returns the
// database's URL as that role.
func readWriteRole(t *testing.T, adminURL string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role := "capacityd_rw_" + randomSuffix()
	conn, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var db string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	for _, q := range []string{
		`CREATE ROLE ` + role + ` LOGIN PASSWORD 'rw-password'`,
		`REVOKE CREATE ON SCHEMA public FROM PUBLIC`,
		`REVOKE CREATE, TEMPORARY ON DATABASE ` + db + ` FROM PUBLIC`,
		`GRANT CONNECT ON DATABASE ` + db + ` TO ` + role,
		`GRANT USAGE ON SCHEMA public TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ` + role,
		`GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO ` + role,
	} {
		_, err := conn.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testenv.DatabaseURL())
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		// The database is dropped by testenv, which ends the role's sessions.
		_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+db+` WITH (FORCE)`)
		_, _ = conn.Exec(ctx, `DROP ROLE IF EXISTS `+role)
	})
	u, err := url.Parse(adminURL)
	require.NoError(t, err)
	u.User = url.UserPassword(role, "rw-password")
	return u.String()
}

// randomSuffix returns ten hex digits, to name a role or database.
func randomSuffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestServeWithAReadWriteOnlyRoleWhenMigrationsRunApart(t *testing.T) {
	t.Parallel()
	rw := readWriteRole(t, testenv.NewDatabase(t))

	// The role really has no DDL rights.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, rw)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE TABLE ddl_probe (id int)`)
	require.ErrorContains(t, err, "permission denied")
	conn.Close(ctx)

	p := apptest.StartProcess(t, rw, testenv.RedisURL(), "MIGRATE_ON_START=false")
	r, err := apptest.Do(http.MethodPost, p.URL+"/v1/activities", p.Token(t, "admin", true), `{"title":"read-write role","capacity":2}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var a struct{ ID string }
	r.JSON(t, &a)
	r, err = apptest.Do(http.MethodPost, p.URL+"/v1/activities/"+a.ID+"/registrations", p.Token(t, "alice", false), `{}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	r, err = apptest.Do(http.MethodGet, p.URL+"/v1/activities/"+a.ID, "", nil)
	require.NoError(t, err)
	require.Contains(t, string(r.Body), `"taken":1,`)
	require.NotContains(t, p.Output(), "migrations applied")
}

func TestServeWithoutMigrationsRefusesAnUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	// The binary and the database first: the deadline is the command's.
	bin, url := apptest.Binary(t), testenv.EmptyDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "REDIS_URL=", "CAPACITY_JWT_SECRET="+apptest.Secret, "MIGRATE_ON_START=false")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "pending migrations: run capacityd migrate first")
	require.Less(t, time.Since(start), 15*time.Second, "no retrying a schema that is behind")
}
