// Package testenv gives tests real dependencies: an isolated, migrated
// PostgreSQL database per test on the shared server, the shared Redis, and
// private redis-server and PostgreSQL processes on free ports that fault
// tests can stop and start.
//
// The shared servers are named by TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/capacityd_test) and TEST_REDIS_URL
// (default redis://127.0.0.1:6379/0); make test sets both. Under -short
// every helper that needs a service skips its test (SkipShort).
package testenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/physiciansnet/capacityd/migrations"
	"github.com/physiciansnet/capacityd/store"
)

// DatabaseURL returns the URL of the shared test database server.
func DatabaseURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/capacityd_test?sslmode=disable"
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// migrationsHash names the template database after the migrations, so a
// schema change gets a template of its own.
func migrationsHash() string {
	h := sha256.New()
	_ = fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := migrations.FS.ReadFile(path)
			h.Write([]byte(path))
			h.Write(b)
		}
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// withDatabase returns base with its database name replaced.
func withDatabase(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

// ensureTemplate creates, once per schema, a migrated template database
// that every test database is copied from. Concurrent test binaries
// serialise on an advisory lock.
func ensureTemplate(ctx context.Context, base string) (string, error) {
	templateOnce.Do(func() {
		templateName = "capacityd_tmpl_" + migrationsHash()
		templateErr = func() error {
			conn, err := pgx.Connect(ctx, base)
			if err != nil {
				return fmt.Errorf("testenv: connect to TEST_DATABASE_URL %s: %w", base, err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(7426001)`); err != nil {
				return err
			}
			defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(7426001)`)
			var exists bool
			if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, templateName).Scan(&exists); err != nil {
				return err
			}
			if exists {
				return nil
			}
			building := templateName + "_build"
			_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+building+` WITH (FORCE)`)
			if _, err := conn.Exec(ctx, `CREATE DATABASE `+building); err != nil {
				return err
			}
			pool, err := store.OpenConnPool(ctx, withDatabase(base, building), store.ConnPoolConfig{MaxConns: 2})
			if err != nil {
				return err
			}
			_, err = store.Migrate(ctx, pool)
			pool.Close()
			if err != nil {
				return err
			}
			_, err = conn.Exec(ctx, `ALTER DATABASE `+building+` RENAME TO `+templateName)
			return err
		}()
	})
	return templateName, templateErr
}

// NewDatabase creates a fresh migrated database for t, dropped when t ends,
// and returns its URL.
func NewDatabase(t T) string {
	t.Helper()
	SkipShort(t, "PostgreSQL (TEST_DATABASE_URL)")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := DatabaseURL()
	tmpl, err := ensureTemplate(ctx, base)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	name := "capacityd_t_" + randomHex(6)
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("testenv: connect: %v", err)
	}
	defer conn.Close(ctx)
	// Concurrent copies of one template can collide on its lock; retry.
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, `CREATE DATABASE `+name+` TEMPLATE `+tmpl)
		if err == nil || attempt == 20 || !strings.Contains(err.Error(), "being accessed by other users") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("testenv: create database: %v", err)
	}
	t.Cleanup(func() { dropDatabase(base, name) })
	return withDatabase(base, name)
}

// EmptyDatabase creates an empty (unmigrated) database on the shared
// server for t, dropped when t ends, and returns its URL.
func EmptyDatabase(t T) string {
	t.Helper()
	SkipShort(t, "PostgreSQL (TEST_DATABASE_URL)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := DatabaseURL()
	name := "capacityd_empty_" + randomHex(6)
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("testenv: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("testenv: create database: %v", err)
	}
	t.Cleanup(func() { dropDatabase(base, name) })
	return withDatabase(base, name)
}

// dropDatabase drops database name of the server at base, cutting its
// connections; an error is left to the next run.
func dropDatabase(base, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
}

// DB returns a pool on a fresh migrated database for t, closed when t ends.
func DB(t T) *pgxpool.Pool {
	t.Helper()
	return Pool(t, NewDatabase(t), 16)
}

// Pool opens a pool on url with the service's session settings, closed
// when t ends.
func Pool(t T, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	return PoolWith(t, url, store.ConnPoolConfig{MaxConns: maxConns})
}

// PoolWith opens a pool on url with pc, closed when t ends.
func PoolWith(t T, url string, pc store.ConnPoolConfig) *pgxpool.Pool {
	t.Helper()
	SkipShort(t, "PostgreSQL")
	pool, err := store.OpenConnPool(context.Background(), url, pc)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
