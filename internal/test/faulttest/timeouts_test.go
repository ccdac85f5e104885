package faulttest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// admissionLockNamespace is store's first advisory lock key ("CAPA").
const admissionLockNamespace = 0x43415041

// TestHeldAdmissionLockAnswers503WithinLockTimeout holds an activity's
// admission lock from another session: a signup waits at most the 3 s
// lock_timeout and answers 503 with Retry-After, writes nothing and
// releases its display hold; once the lock is free, signups succeed.
func TestHeldAdmissionLockAnswers503WithinLockTimeout(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "locked", 10)
	r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", inst.Token(t, "first", false), `{}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, inst.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var internalID int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT id FROM activity WHERE public_id = $1`, id).Scan(&internalID))
	_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1::int4, $2::int4)`, int32(admissionLockNamespace), int32(internalID))
	require.NoError(t, err)

	start := time.Now()
	r = inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", inst.Token(t, "blocked", false), `{}`)
	took := time.Since(start)
	requireUnavailable(t, r)
	require.GreaterOrEqual(t, took, 2500*time.Millisecond, "it waited for the lock")
	require.Less(t, took, 8*time.Second, "503 within the lock timeout, not hung")

	held := inst.DisplayTaken(t, id)
	require.Equal(t, 1, held, "the display hold was released")
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM registration`).Scan(&n))
	require.Equal(t, 1, n, "nothing written")

	_, err = conn.Exec(ctx, `SELECT pg_advisory_unlock($1::int4, $2::int4)`, int32(admissionLockNamespace), int32(internalID))
	require.NoError(t, err)
	r = inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", inst.Token(t, "blocked", false), `{}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
}

// TestSilentRedisFallsBackToTheAuthority points the display tier at a
// server that accepts connections and never answers: signups and seat
// reads still succeed from the authority within the request deadline.
func TestSilentRedisFallsBackToTheAuthority(t *testing.T) {
	t.Parallel()
	const deadline = 5 * time.Second
	inst := apptest.Start(t, apptest.Options{RedisURL: "redis://" + silentServer(t) + "/0", App: app.Options{RequestTimeout: deadline}})
	id := inst.CreateActivity(t, "silent redis", 2)
	for i, want := range []int{201, 201, 409} {
		start := time.Now()
		r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", inst.Token(t, "u"+string(rune('a'+i)), false), `{}`)
		require.Equal(t, want, r.Status, "%s", r.Body)
		require.Less(t, time.Since(start), deadline, "answered within the deadline")
	}
	start := time.Now()
	taken, source := seatsOf(t, inst, id)
	require.Less(t, time.Since(start), deadline)
	require.Equal(t, 2, taken)
	require.Equal(t, "database", source)
	r := inst.MustDo(t, http.MethodGet, "/readyz", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.JSONEq(t, `{"postgres":"ok","redis":"degraded"}`, string(r.Body))
}

// TestSilentPostgresAnswers503WithinDeadline points the service at a
// "database" that accepts connections and never answers: requests answer
// 503 within the deadline instead of hanging.
func TestSilentPostgresAnswers503WithinDeadline(t *testing.T) {
	t.Parallel()
	const deadline = 5 * time.Second
	url := "postgres://postgres@" + silentServer(t) + "/none?sslmode=disable"
	inst := apptest.Start(t, apptest.Options{DatabaseURL: url, RedisURL: testenv.RedisURL(), App: app.Options{RequestTimeout: deadline}})
	tok := inst.Token(t, "stuck", false)
	for _, c := range []struct{ method, path, token string }{
		{http.MethodPost, "/v1/activities/a_01JD0000000000000000000000/registrations", tok},
		{http.MethodGet, "/v1/activities/a_01JD0000000000000000000000", ""},
		{http.MethodPost, "/v1/notes/stuck/views", ""},
	} {
		start := time.Now()
		r := inst.MustDo(t, c.method, c.path, c.token, `{}`)
		requireUnavailable(t, r)
		require.Less(t, time.Since(start), deadline+2*time.Second, "%s %s hung", c.method, c.path)
	}
	start := time.Now()
	r := inst.MustDo(t, http.MethodGet, "/readyz", "", nil)
	require.Less(t, time.Since(start), 4*time.Second)
	require.Equal(t, http.StatusServiceUnavailable, r.Status)
	require.NotEmpty(t, r.Header.Get("Retry-After"))
	require.JSONEq(t, `{"postgres":"unavailable","redis":"ok"}`, string(r.Body))
}
