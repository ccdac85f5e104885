package faulttest

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/store"
)

// migratedPrivatePostgres starts a private cluster and migrates its
// postgres database.
func migratedPrivatePostgres(t *testing.T) *testenv.PostgresServer {
	t.Helper()
	pg := testenv.PrivatePostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool := testenv.Pool(t, pg.URL, 2)
	_, err := store.Migrate(ctx, pool)
	require.NoError(t, err)
	pool.Close()
	return pg
}

// query runs one query on a connection of its own and scans one row.
func query(t *testing.T, url, sql string, dst ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(dst...))
}

// requireUnavailable checks a documented 503.
func requireUnavailable(t *testing.T, r apptest.Response) {
	t.Helper()
	require.Equal(t, 503, r.Status, "%s", r.Body)
	require.Equal(t, "unavailable", r.ErrorCode(), "%s", r.Body)
	require.NotEmpty(t, r.Header.Get("Retry-After"))
}

// silentServer accepts TCP connections and never answers: a stuck
// dependency. It returns its address.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	conns := make(chan net.Conn, 1024)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case conns <- c:
			default:
				c.Close()
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for {
			select {
			case c := <-conns:
				c.Close()
			default:
				return
			}
		}
	})
	return ln.Addr().String()
}

// seatsOf reads the seat display of an activity.
func seatsOf(t *testing.T, inst *apptest.Instance, id string) (taken int, source string) {
	t.Helper()
	r := inst.MustDo(t, "GET", "/v1/activities/"+id+"/seats", "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	var s struct {
		Taken  int    `json:"taken"`
		Source string `json:"source"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &s))
	return s.Taken, s.Source
}
