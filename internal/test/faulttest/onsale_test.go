package faulttest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// TestOnSaleSurvivesARedisFlushAndAnInstanceKill: 80 users join an
// activity's queue on two instances before it opens, then poll as told
// and sign up when admitted. Mid on-sale Redis is flushed and one instance
// SIGKILLed. No position changes, no place is admitted twice, admission
// follows positions, and every user ends with exactly one registration.
func TestOnSaleSurvivesARedisFlushAndAnInstanceKill(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	redis := testenv.PrivateRedis(t)
	env := []string{"RATE_LIMIT_SIGNUPS=0", "RATE_LIMIT_PUBLIC_WRITES=0", "RATE_LIMIT_PUBLIC_READS=0"}
	procs := []*apptest.Process{apptest.StartProcess(t, db, redis.URL(), env...), apptest.StartProcess(t, db, redis.URL(), env...)}
	var killed sync.Mutex // held while procs[1] may be used
	alive := func(i int) *apptest.Process {
		if i%2 == 1 && killed.TryLock() {
			defer killed.Unlock()
			return procs[1]
		}
		return procs[0]
	}

	opens := time.Now().Add(3 * time.Second).UTC()
	r, err := apptest.Do(http.MethodPost, procs[0].URL+"/v1/activities", procs[0].Token(t, "admin", true), map[string]any{
		"title": "on-sale under faults", "capacity": 100, "opens_at": opens.Format(time.RFC3339Nano),
		"queue": map[string]any{"admit_per_second": 20, "max_admitted": 30, "token_seconds": 120, "absent_seconds": 60}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	var act struct{ ID string }
	r.JSON(t, &act)

	const n = 80
	type ticket struct {
		State          string  `json:"state"`
		Position       *int64  `json:"position"`
		AdmissionToken *string `json:"admission_token"`
		PollAfterMS    int64   `json:"poll_after_ms"`
	}
	positions := make([]map[int64]bool, n)
	for i := range n {
		p := procs[i%2]
		r, err := apptest.Do(http.MethodPost, p.URL+"/v1/activities/"+act.ID+"/queue", p.Token(t, fmt.Sprint("fan-", i), false), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		positions[i] = map[int64]bool{}
	}

	var wg sync.WaitGroup
	var signedUp sync.Map
	deadline := time.Now().Add(90 * time.Second)
	for i := range n {
		wg.Go(func() {
			user := fmt.Sprint("fan-", i)
			token := ""
			for time.Now().Before(deadline) {
				p := alive(i)
				r, err := apptest.Do(http.MethodGet, p.URL+"/v1/activities/"+act.ID+"/queue/me", p.Token(t, user, false), nil)
				if err != nil || r.Status != http.StatusOK {
					// Kept: a client's backoff after the killed instance
					// (or a 503 while it went), before it asks again; it
					// spaces the polls and proves nothing itself.
					time.Sleep(200 * time.Millisecond)
					continue
				}
				var tk ticket
				r.JSON(t, &tk)
				if tk.Position != nil {
					positions[i][*tk.Position] = true
				}
				if tk.State == "admitted" {
					token = *tk.AdmissionToken
				}
				// A used place whose signup's answer was lost (its instance
				// was killed) is resolved by the same request again: the
				// Idempotency-Key replays the signup.
				if tk.State == "admitted" || (tk.State == "used" && token != "") {
					r, err := apptest.Do(http.MethodPost, p.URL+"/v1/activities/"+act.ID+"/registrations", p.Token(t, user, false), `{}`,
						"Admission-Token", token, "Idempotency-Key", "fan-key-"+user)
					if err == nil && r.Status == http.StatusCreated {
						signedUp.Store(i, true)
						return
					}
				}
				// Kept: the client polls no sooner than the ticket's
				// poll_after_ms says (at most a second here, to keep the
				// test short), as the API asks; the polls' spacing is
				// part of what is tested.
				time.Sleep(time.Duration(min(tk.PollAfterMS, 1000)) * time.Millisecond)
			}
			t.Errorf("%s never signed up", user)
		})
	}

	// Mid on-sale: once some are admitted, Redis loses everything and one
	// instance dies.
	// Not fatal: the signers run on, and say which of them never signed up.
	assert.Eventually(t, func() bool {
		admitted, err := countAdmitted(t.Context(), db)
		return err == nil && admitted >= 20
	}, time.Until(deadline), 100*time.Millisecond, "20 admitted before the faults")
	require.NoError(t, testenv.RedisClient(t, redis.URL()).FlushAll(t.Context()).Err())
	killed.Lock()
	procs[1].Signal(t, syscall.SIGKILL)
	wg.Wait()

	// Every position seen by a user is the one the authority holds.
	for i := range n {
		var pos int64
		query(t, db, fmt.Sprintf(`SELECT position FROM queue_ticket WHERE user_id = 'fan-%d'`, i), &pos)
		for seen := range positions[i] {
			require.Equal(t, pos, seen, "fan-%d saw its position change", i)
		}
	}
	var places, used, tokens, regs, outOfOrder int
	query(t, db, `SELECT count(*), count(*) FILTER (WHERE state = 'used'), count(DISTINCT token) FROM queue_ticket`, &places, &used, &tokens)
	query(t, db, `SELECT count(*) FROM registration WHERE status = 'pending'`, &regs)
	// Admission by position: no place admitted before one ahead of it.
	query(t, db, `SELECT count(*) FROM queue_ticket x JOIN queue_ticket y ON x.position < y.position
		WHERE x.admitted_at > y.admitted_at`, &outOfOrder)
	require.Equal(t, n, places, "one place each")
	require.Equal(t, n, used, "every place used once")
	require.Equal(t, n, tokens, "one token per place")
	require.Equal(t, n, regs, "one registration per user")
	require.Zero(t, outOfOrder, "admitted in position order")
}

// countAdmitted counts the places admitted or used at the authority, for a
// wait's condition (which must not fail the test from its goroutine).
func countAdmitted(ctx context.Context, url string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM queue_ticket WHERE state IN ('admitted', 'used')`).Scan(&n)
	return n, err
}
