package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
	"github.com/physiciansnet/capacityd/webhook"
)

// planNode is the part of EXPLAIN (FORMAT JSON) the test reads.
type planNode struct {
	NodeType      string     `json:"Node Type"`
	IndexName     string     `json:"Index Name"`
	IndexCond     string     `json:"Index Cond"`
	Filter        string     `json:"Filter"`
	RowsRemoved   float64    `json:"Rows Removed by Filter"`
	ActualRows    float64    `json:"Actual Rows"`
	Plans         []planNode `json:"Plans"`
	RecheckCond   string     `json:"Recheck Cond"`
	HeapFetches   float64    `json:"Heap Fetches"`
	RelationName  string     `json:"Relation Name"`
	ParentRelship string     `json:"Parent Relationship"`
}

func scans(n planNode) []planNode {
	var out []planNode
	if n.RelationName != "" {
		out = append(out, n)
	}
	for _, c := range n.Plans {
		out = append(out, scans(c)...)
	}
	return out
}

// TestAuthorityCountStaysAnIndexScanAfterManyExecutions guards against the
// generic-plan trap: after five executions of a prepared statement
// PostgreSQL may switch to a generic plan; the authority COUNT must still
// read only the activity's occupying index entries.
func TestAuthorityCountStaysAnIndexScanAfterManyExecutions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.DB(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO activity (public_id, title, capacity)
		SELECT 'a_plan' || g, 'plan ' || g, 100000 FROM generate_series(1, 300) g;
		INSERT INTO registration (public_id, activity_id, user_id, status, waitlist_seq, seats)
		SELECT 'r_plan' || g,
			CASE WHEN g % 3 = 0 THEN 1 ELSE 2 + g % 299 END,
			'u' || g,
			CASE WHEN g % 20 < 4 THEN 'pending' WHEN g % 20 < 6 THEN 'approved' WHEN g % 20 = 6 THEN 'waitlisted' ELSE 'cancelled' END,
			CASE WHEN g % 20 = 6 THEN g END,
			1 + g % 4
		FROM generate_series(1, 120000) g;`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `VACUUM ANALYZE registration`)
	require.NoError(t, err)

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var hotID int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT id FROM activity WHERE public_id = 'a_plan1'`).Scan(&hotID))

	_, err = conn.Exec(ctx, `PREPARE authority_count(bigint) AS `+store.CountOccupyingSQL)
	require.NoError(t, err)
	var want, rows int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT sum(seats), count(*) FROM registration
		WHERE activity_id = $1 AND status IN ('pending','awaiting_payment','approved')`, hotID).Scan(&want, &rows))
	require.Greater(t, want, rows, "parties of several seats")
	for range 20 {
		var n int64
		require.NoError(t, conn.QueryRow(ctx, `EXECUTE authority_count(`+itoa(hotID)+`)`, pgx.QueryExecModeSimpleProtocol).Scan(&n))
		require.Equal(t, want, n)
	}

	var raw []byte
	require.NoError(t, conn.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE authority_count(`+itoa(hotID)+`)`,
		pgx.QueryExecModeSimpleProtocol).Scan(&raw))
	var explained []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &explained))
	ss := scans(explained[0].Plan)
	require.Len(t, ss, 1, "one scan of registration: %s", raw)
	scan := ss[0]
	require.Equal(t, "Index Only Scan", scan.NodeType, "the seats are summed from the index alone: %s", raw)
	require.Zero(t, scan.HeapFetches, "no heap fetch: the visibility map covers the vacuumed table: %s", raw)
	require.NotEmpty(t, scan.IndexCond, "the activity and status are index conditions: %s", raw)
	require.Zero(t, scan.RowsRemoved, "no filter over the activity's rows: %s", raw)
	require.Equal(t, float64(rows), scan.ActualRows, "reads exactly the occupying entries: %s", raw)
	require.Equal(t, "registration_occupying_idx", scan.IndexName, "the partial index of the occupying rows: %s", raw)
	t.Logf("authority COUNT plan after 20 executions: %s on %s, cond %s, heap fetches %v", scan.NodeType, scan.IndexName, scan.IndexCond, scan.HeapFetches)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// genericRecorder records the statements that pgx sends in batches inside
// a transaction running with generic plans (after store.GenericPlans), per
// connection: until the explicit transaction ends, or the batch does when
// it ran in an implicit one.
type genericRecorder struct {
	mu      sync.Mutex
	generic map[*pgx.Conn]bool
	sql     map[string]bool
}

func (r *genericRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (r *genericRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *genericRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *genericRecorder) TraceBatchQuery(_ context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch q := strings.TrimSpace(data.SQL); {
	case q == store.GenericPlans:
		r.generic[conn] = true
	case q == "COMMIT" || q == "ROLLBACK":
		r.generic[conn] = false
	case r.generic[conn] && !strings.HasPrefix(q, "SET LOCAL"):
		r.sql[q] = true
	}
}

func (r *genericRecorder) TraceBatchEnd(_ context.Context, conn *pgx.Conn, _ pgx.TraceBatchEndData) {
	if conn.PgConn().TxStatus() == 'I' {
		r.mu.Lock()
		r.generic[conn] = false
		r.mu.Unlock()
	}
}

// largeTables are the tables that grow with the registrations: a generic
// plan must never read one of them whole.
var largeTables = map[string]bool{
	"registration": true, "registration_event": true, "activity": true, "activity_state": true,
	"idempotency_key": true, "activity_pool": true, "pool": true,
	// The check-in tables start empty and fill during a door's rush, faster
	// than autovacuum analyzes them: a plan must not read them whole
	// because they were small when last analyzed.
	"checkin": true, "checkin_record": true,
}

// TestGenericPlansReadLargeTablesByIndex: every statement that runs with
// its generic plan (the change transaction's, the registrations lookup,
// the authority's full check and the webhook claim that a local commit
// wakes) reads the large tables through
// their indexes, with thousands of activities and a hundred thousand
// registrations. PostgreSQL plans a generic plan without the parameters'
// values, so a plan that is right here is right for any values.
func TestGenericPlansReadLargeTablesByIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, rec := largeStore(t)

	// One transaction of every kind of command, with counts read, the
	// waiting list's head read and idempotency keys written.
	a, err := s.CreateActivity(ctx, newID("a"), registration.NewActivity{Title: "generic", Capacity: 2, HoldSeconds: 900, Waitlist: true})
	require.NoError(t, err)
	first, second, third := signupOf("g1"), signupOf("g2"), signupOf("g3")
	first.IdempotencyKey, first.RequestHash = "k1", []byte{1}
	_, err = s.Apply(ctx, []registration.CommandBatch{{ActivityID: a.ID, Commands: []registration.Command{first, second, third}}}, time.Now())
	require.NoError(t, err)
	admin := registration.Origin{Actor: "admin"}
	capacity := 3
	applied, err := s.Apply(ctx, []registration.CommandBatch{{ActivityID: a.ID, Commands: []registration.Command{
		registration.StatusCommand{Origin: admin, RegistrationID: second.RegistrationID, To: registration.Approved},
		registration.CancelCommand{Origin: admin, RegistrationID: first.RegistrationID, Caller: registration.Caller{Admin: true}},
		registration.ActivityCommand{Origin: admin, Patch: registration.ActivityPatch{Capacity: &capacity}},
	}}}, time.Now())
	require.NoError(t, err)
	require.NoError(t, applied[0].Err)
	regs, err := s.GetRegistrations(ctx, []string{first.RegistrationID, third.RegistrationID})
	require.NoError(t, err)
	require.Len(t, regs, 2)
	// The authority's confirmation of a refusal, of an activity in no pool
	// and of one in a pool (whose statement reads the pools too).
	hall := createPool(t, s, 5)
	pooled := createPooled(t, s, 3, true, hall)
	answers, err := s.CheckFull(ctx, []registration.FullCheck{{ActivityID: a.ID, UserIDs: []string{"g3"}}})
	require.NoError(t, err)
	require.Equal(t, 2, answers[0].Taken)
	answers, err = s.CheckFull(ctx, []registration.FullCheck{{ActivityID: pooled, UserIDs: []string{"g1"}}})
	require.NoError(t, err)
	require.Equal(t, []registration.Room{{Pool: hall, Capacity: 5}}, answers[0].Pools)
	// The webhook's claim of the activity's events after its commits, and
	// of its retries.
	jobs, err := s.ClaimDeliveries(ctx, webhook.Claim{Lease: time.Minute, Slots: 10, Activities: []string{a.ID}})
	require.NoError(t, err)
	require.NotEmpty(t, jobs)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.GreaterOrEqual(t, len(rec.sql), 10, "the statements of a change transaction and the lookup: %v", rec.sql)
	t.Logf("%d statements run with their generic plans", len(rec.sql))
	// Where the server can compile plans, the threshold below makes it
	// compile any plan whose JIT is not turned off.
	var jit bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_jit_available()`).Scan(&jit))
	if jit {
		var raw []byte
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL jit_above_cost = 0"); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) SELECT count(*) FROM registration").Scan(&raw)
		})
		require.NoError(t, err)
		require.Contains(t, string(raw), `"JIT"`, "without the service's setting the plan is compiled")
	} else {
		t.Log("this PostgreSQL cannot compile plans (pg_jit_available() is false): the JIT check cannot fail here")
	}
	requireIndexedGenericPlans(t, pool, rec.sql)
}

// largeStore returns a Store on a new database seeded as seedLarge does,
// recording the statements it runs with their generic plans, and a pool
// of its own on the database.
func largeStore(t *testing.T) (*store.Store, *pgxpool.Pool, *genericRecorder) {
	t.Helper()
	url := testenv.NewDatabase(t)
	rec := &genericRecorder{generic: make(map[*pgx.Conn]bool), sql: make(map[string]bool)}
	s := store.New(testenv.PoolWith(t, url, store.ConnPoolConfig{MaxConns: 4, Tracer: rec}))
	pool := testenv.Pool(t, url, 2)
	seedLarge(t, pool)
	return s, pool, rec
}

// paramNulls is the arguments of an EXECUTE of the prepared statement q:
// a NULL for each of its parameters, in parentheses, or nothing.
func paramNulls(q string) string {
	n := 0
	for _, m := range regexp.MustCompile(`\$(\d+)`).FindAllStringSubmatch(q, -1) {
		k, _ := strconv.Atoi(m[1])
		n = max(n, k)
	}
	if n == 0 {
		return ""
	}
	return "(" + strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ") + ")"
}

// requireIndexedGenericPlans explains each statement with its generic
// plan, under the service's settings and a JIT threshold that any plan
// passes, and fails if one is compiled or reads one of largeTables whole.
// It returns the plans by statement.
func requireIndexedGenericPlans(t *testing.T, pool *pgxpool.Pool, sqls map[string]bool) map[string]planNode {
	t.Helper()
	ctx := context.Background()
	plans := make(map[string]planNode, len(sqls))
	for q := range sqls {
		explain := "EXPLAIN (FORMAT JSON) EXECUTE generic" + paramNulls(q)
		var raw []byte
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			// The service's settings, then a JIT threshold that any plan
			// passes: the plan must still not be compiled.
			_, err := tx.Exec(ctx, store.GenericPlans+"; SET LOCAL jit_above_cost = 0; PREPARE generic AS "+q, pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, explain, pgx.QueryExecModeSimpleProtocol).Scan(&raw); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, "DEALLOCATE generic")
			return err
		})
		require.NoError(t, err, q)
		var explained []struct {
			Plan planNode `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal(raw, &explained))
		require.NotContains(t, string(raw), `"JIT"`, "a generic plan is compiled at every execution:\n%s", q)
		for _, sc := range scans(explained[0].Plan) {
			if largeTables[sc.RelationName] {
				require.NotEqual(t, "Seq Scan", sc.NodeType, "a generic plan reads %s whole:\n%s\n%s", sc.RelationName, q, raw)
				require.NotContains(t, sc.Filter, "ANY ($", "a generic plan reads a range of %s and filters it by a list, instead of looking each up:\n%s\n%s",
					sc.RelationName, q, raw)
			}
		}
		plans[q] = explained[0].Plan
	}
	return plans
}

// largeSeed fills a database as a busy deployment's: 3,000 activities (a
// third of them changed once, half of them in one of 500 pools), 120,000
// registrations, 60,000 idempotency records, and one enabled webhook for
// every event; then ANALYZE.
const largeSeed = `
		INSERT INTO activity (public_id, title, capacity, waitlist)
		SELECT 'a_generic' || g, 'generic ' || g, 1000, g % 2 = 0 FROM generate_series(1, 3000) g;
		INSERT INTO activity_state (activity_id, last_seq) SELECT id, 0 FROM activity WHERE id % 3 = 0;
		INSERT INTO registration (public_id, activity_id, user_id, status, waitlist_seq)
		SELECT 'r_generic' || g, 1 + g % 3000, 'u' || g,
			CASE WHEN g % 10 < 6 THEN 'pending' WHEN g % 10 < 8 THEN 'waitlisted' ELSE 'cancelled' END,
			CASE WHEN g % 10 IN (6, 7) THEN g END
		FROM generate_series(1, 120000) g;
		INSERT INTO idempotency_key (activity_id, user_id, key, request_hash, outcome, registration_id, body)
		SELECT 1 + g % 3000, 'u' || g, 'k' || g, '\x01', 'created', 'r_generic' || g, '\x7b7d'
		FROM generate_series(1, 60000) g;
		INSERT INTO webhook (public_id, url, events, secret) VALUES ('wh_generic', 'https://example.com/hook', '{*}', '\x00');
		INSERT INTO pool (public_id, title, capacity) SELECT 'p_generic' || g, 'generic ' || g, 1000 FROM generate_series(1, 500) g;
		INSERT INTO activity_pool (activity_id, pool_id) SELECT id, 1 + id % 500 FROM activity WHERE id % 2 = 0;
		ANALYZE;`

func seedLarge(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), largeSeed)
	require.NoError(t, err)
}

// BenchmarkGetRegistrations: the lookup of 8 registrations by id with a
// plan made at every execution (PostgreSQL's default for it) and with its
// generic plan (what GetRegistrations does), one connection.
func BenchmarkGetRegistrations(b *testing.B) {
	ctx := context.Background()
	pool := testenv.Pool(b, testenv.NewDatabase(b), 1)
	seedLarge(b, pool)
	s := store.New(pool)
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = fmt.Sprintf("r_generic%d", 1+i*15001)
	}
	b.Run("custom-plans", func(b *testing.B) {
		for b.Loop() {
			regs, err := s.GetRegistrationsPlannedEachTime(ctx, ids)
			require.NoError(b, err)
			require.Len(b, regs, len(ids))
		}
	})
	b.Run("generic-plan", func(b *testing.B) {
		for b.Loop() {
			regs, err := s.GetRegistrations(ctx, ids)
			require.NoError(b, err)
			require.Len(b, regs, len(ids))
		}
	})
}
