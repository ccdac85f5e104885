package note_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/note"
	"github.com/physiciansnet/capacityd/store"
)

// countingStore is the real store, counting the upserts it is asked for.
type countingStore struct {
	*store.Store
	upserts  atomic.Int64
	maxBatch atomic.Int64
	// pending counts the increments in upserts under way.
	pending atomic.Int64
	// reads counts the read statements, inFlight and maxInFlight those
	// running at once.
	reads, inFlight, maxInFlight atomic.Int64
}

func (c *countingStore) NotesStats(ctx context.Context, ids []string) ([]note.Stats, error) {
	c.reads.Add(1)
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		m := c.maxInFlight.Load()
		if n <= m || c.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	return c.Store.NotesStats(ctx, ids)
}

func (c *countingStore) AddNoteStats(ctx context.Context, id string, views, waters int64) (note.Stats, error) {
	c.upserts.Add(1)
	for n := views + waters; ; {
		m := c.maxBatch.Load()
		if n <= m || c.maxBatch.CompareAndSwap(m, n) {
			break
		}
	}
	c.pending.Add(views + waters)
	defer c.pending.Add(-(views + waters))
	return c.Store.AddNoteStats(ctx, id, views, waters)
}

// waitQueued waits until n increments of the note are queued for the next
// upsert.
func waitQueued(t *testing.T, b bundle, id string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return b.svc.QueuedIncrements(id) == n }, 10*time.Second, time.Millisecond,
		"%d increments queued", n)
}

// waitAccepted waits until n increments are in the service: queued for an
// upsert or in one under way.
func waitAccepted(t *testing.T, b bundle, id string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return b.store.pending.Load()+int64(b.svc.QueuedIncrements(id)) == int64(n) },
		10*time.Second, time.Millisecond, "%d increments accepted", n)
}

type bundle struct {
	pool  *pgxpool.Pool
	store *countingStore
	svc   *note.Service
	reg   *prometheus.Registry
}

// setup returns a Service on a fresh database; pc tunes its pool.
func setup(t *testing.T, url string, pc store.ConnPoolConfig, cfg note.Config) bundle {
	t.Helper()
	if url == "" {
		url = testenv.NewDatabase(t)
	}
	pool, err := store.OpenConnPool(context.Background(), url, pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := bundle{pool: pool, store: &countingStore{Store: store.New(pool)}, reg: prometheus.NewRegistry()}
	cfg.Store, cfg.Registerer = b.store, b.reg
	b.svc = note.NewService(cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = b.svc.Close(ctx)
	})
	return b
}

// dbStats reads a note's counters straight from the table.
func dbStats(t *testing.T, pool *pgxpool.Pool, id string) (views, waters int64) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT views, waters FROM note_stats WHERE note_id = $1`, id).Scan(&views, &waters)
	require.NoError(t, err)
	return views, waters
}

// result is what one increment was answered.
type result struct {
	kind note.Kind
	st   note.Stats
	err  error
}

// burst runs views and waters increments of one note, each from its own
// goroutine, all released at once, and returns every answer.
func burst(svc *note.Service, id string, views, waters int) []result {
	ks := kinds(views, waters)
	out := make([]result, len(ks))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, k := range ks {
		out[i].kind = k
		wg.Go(func() {
			<-start
			out[i].st, out[i].err = svc.Increment(context.Background(), id, k)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// requireExact checks that the answers of one kind are exactly the numbers
// base+1 .. base+n (each one once), and that every answer lies within the
// totals.
func requireExact(t *testing.T, res []result, baseViews, baseWaters, totalViews, totalWaters int64) {
	t.Helper()
	var views, waters []int64
	for _, r := range res {
		require.NoError(t, r.err)
		require.LessOrEqual(t, r.st.Views, totalViews)
		require.LessOrEqual(t, r.st.Waters, totalWaters)
		require.GreaterOrEqual(t, r.st.Views, baseViews)
		require.GreaterOrEqual(t, r.st.Waters, baseWaters)
		if r.kind == note.View {
			views = append(views, r.st.Views)
		} else {
			waters = append(waters, r.st.Waters)
		}
	}
	requireSequence(t, "views", views, baseViews+1, totalViews)
	requireSequence(t, "waters", waters, baseWaters+1, totalWaters)
}

func requireSequence(t *testing.T, what string, got []int64, from, to int64) {
	t.Helper()
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	require.Len(t, got, int(to-from+1), what)
	for i, v := range got {
		if v != from+int64(i) {
			require.Failf(t, what+" answered are not each number once", "position %d: want %d, got %d", i, from+int64(i), v)
		}
	}
}

func kinds(views, waters int) []note.Kind {
	ks := make([]note.Kind, 0, views+waters)
	for i := 0; i < views+waters; i++ {
		// Spread the waters evenly among the views.
		if i*waters/(views+waters) != (i+1)*waters/(views+waters) {
			ks = append(ks, note.Water)
		} else {
			ks = append(ks, note.View)
		}
	}
	return ks
}

// waitLockWaiters waits until n backends of the pool's database wait on a
// lock. It asks on a connection of its own: the waiters may hold every
// connection of the pool.
func waitLockWaiters(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	require.Eventually(t, func() bool {
		var got int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got)
		return err == nil && got >= n
	}, 10*time.Second, 5*time.Millisecond)
}

func TestConcurrentIncrementsAreCombinedAndExact(t *testing.T) {
	t.Parallel()
	b := setup(t, "", store.ConnPoolConfig{}, note.Config{})
	const views, waters = 2000, 500

	res := burst(b.svc, "hot", views, waters)

	requireExact(t, res, 0, 0, views, waters)
	v, w := dbStats(t, b.pool, "hot")
	require.EqualValues(t, views, v)
	require.EqualValues(t, waters, w)
	st, err := b.svc.Get(context.Background(), "hot")
	require.NoError(t, err)
	require.Equal(t, note.Stats{NoteID: "hot", Views: views, Waters: waters}, st)
	upserts := b.store.upserts.Load()
	t.Logf("%d increments took %d upserts", views+waters, upserts)
	require.Less(t, upserts, int64(views+waters)/2, "increments were not combined")
	require.EqualValues(t, views, metric(b, "capacityd_note_increments_total", "view", "committed"))
	require.EqualValues(t, waters, metric(b, "capacityd_note_increments_total", "water", "committed"))
	require.EqualValues(t, upserts, metric(b, "capacityd_note_upserts_total", "ok"))
}

func TestUncombinedIncrementsAreExact(t *testing.T) {
	t.Parallel()
	// 400 upserts of one row through 16 connections queue for them; on a
	// busy test machine the last may wait longer than the default 5 s
	// FlushTimeout, which is not what this test is about.
	b := setup(t, "", store.ConnPoolConfig{}, note.Config{CombiningOff: true, FlushTimeout: time.Minute})
	const views, waters = 300, 100

	res := burst(b.svc, "naive", views, waters)

	requireExact(t, res, 0, 0, views, waters)
	v, w := dbStats(t, b.pool, "naive")
	require.EqualValues(t, views, v)
	require.EqualValues(t, waters, w)
	require.EqualValues(t, views+waters, b.store.upserts.Load(), "one upsert per increment")
	require.EqualValues(t, 1, b.store.maxBatch.Load())
}

func TestOneRequestInFlightCostsOneStatement(t *testing.T) {
	t.Parallel()
	b := setup(t, "", store.ConnPoolConfig{}, note.Config{})
	ctx := context.Background()

	st, err := b.svc.View(ctx, "quiet")
	require.NoError(t, err)
	require.Equal(t, note.Stats{NoteID: "quiet", Views: 1, Waters: 0}, st)
	require.EqualValues(t, 1, b.store.upserts.Load())
	st, err = b.svc.Water(ctx, "quiet")
	require.NoError(t, err)
	require.Equal(t, note.Stats{NoteID: "quiet", Views: 1, Waters: 1}, st)
	require.EqualValues(t, 2, b.store.upserts.Load())
	require.EqualValues(t, 1, b.store.maxBatch.Load())

	st, err = b.svc.Get(ctx, "never-seen")
	require.NoError(t, err)
	require.Equal(t, note.Stats{NoteID: "never-seen"}, st)
	_, err = b.svc.Get(ctx, "bad id")
	require.Equal(t, capacityd.EInvalid, capacityd.ErrorCode(err))
	_, err = b.svc.View(ctx, "")
	require.Equal(t, capacityd.EInvalid, capacityd.ErrorCode(err))
	require.EqualValues(t, 2, b.store.upserts.Load(), "bad ids reach no statement")
}

func TestBatchesAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, "", store.ConnPoolConfig{}, note.Config{MaxBatch: 10})
	ctx := context.Background()
	_, err := b.svc.View(ctx, "bounded")
	require.NoError(t, err)

	// Queue many increments behind a blocked upsert, then let them go.
	release := testenv.LockNote(t, b.pool, "bounded")
	first := make(chan result, 1)
	go func() { st, err := b.svc.View(ctx, "bounded"); first <- result{kind: note.View, st: st, err: err} }()
	waitLockWaiters(t, b.pool, 1)
	done := make(chan []result)
	go func() { done <- burst(b.svc, "bounded", 95, 5) }()
	waitQueued(t, b, "bounded", 100)
	release()
	res := append(<-done, <-first)

	requireExact(t, res, 1, 0, 97, 5)
	require.EqualValues(t, 10, b.store.maxBatch.Load())
	require.GreaterOrEqual(t, b.store.upserts.Load(), int64(1+1+10))
}

func TestFailedUpsertFailsEveryCallerOfItsBatchAndCountsNothing(t *testing.T) {
	t.Parallel()
	// The database cancels a statement after 2s (a lock held too long
	// here): the server itself aborts the upsert, so it surely counted
	// nothing.
	b := setup(t, "", store.ConnPoolConfig{StatementTimeout: 2 * time.Second}, note.Config{})
	ctx := context.Background()
	_, err := b.store.AddNoteStats(ctx, "stuck", 7, 3)
	require.NoError(t, err)
	b.store.upserts.Store(0)

	release := testenv.LockNote(t, b.pool, "stuck")
	first := make(chan result, 1)
	go func() { st, err := b.svc.View(ctx, "stuck"); first <- result{kind: note.View, st: st, err: err} }()
	waitLockWaiters(t, b.pool, 1)
	// These queue behind the blocked upsert and all go into the next one.
	res := append(burst(b.svc, "stuck", 150, 50), <-first)
	release()

	for _, r := range res {
		require.Error(t, r.err)
		require.Equal(t, capacityd.EUnavailable, capacityd.ErrorCode(r.err), "%v", r.err)
	}
	require.EqualValues(t, 2, b.store.upserts.Load(), "one upsert of 1, one combined upsert of 200")
	require.EqualValues(t, 200, b.store.maxBatch.Load())
	require.EqualValues(t, 2, metric(b, "capacityd_note_upserts_total", "error"))
	require.EqualValues(t, 151, metric(b, "capacityd_note_increments_total", "view", "failed"))
	v, w := dbStats(t, b.pool, "stuck")
	require.EqualValues(t, 7, v, "a failed batch counts nothing")
	require.EqualValues(t, 3, w)

	// The note recovers with the database.
	st, err := b.svc.View(ctx, "stuck")
	require.NoError(t, err)
	require.Equal(t, note.Stats{NoteID: "stuck", Views: 8, Waters: 3}, st)
}

func TestCloseCommitsAcceptedIncrements(t *testing.T) {
	t.Parallel()
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("combining_off=%v", off), func(t *testing.T) {
			t.Parallel()
			b := setup(t, "", store.ConnPoolConfig{}, note.Config{CombiningOff: off})
			ctx := context.Background()
			_, err := b.svc.View(ctx, "closing")
			require.NoError(t, err)

			release := testenv.LockNote(t, b.pool, "closing")
			done := make(chan []result)
			go func() { done <- burst(b.svc, "closing", 40, 10) }()
			waitLockWaiters(t, b.pool, 1)
			// The whole burst is in, blocked behind the lock: combined, in
			// the blocked upsert or queued for the next; uncombined, each in
			// its own upsert.
			waitAccepted(t, b, "closing", 50)
			closed := make(chan error)
			go func() { closed <- b.svc.Close(ctx) }()
			select {
			case err := <-closed:
				t.Fatalf("Close returned before the accepted increments were answered: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
			release()
			res := <-done
			require.NoError(t, <-closed)

			requireExact(t, res, 1, 0, 41, 10)
			_, err = b.svc.View(ctx, "closing")
			require.Equal(t, capacityd.EUnavailable, capacityd.ErrorCode(err), "%v", err)
			v, w := dbStats(t, b.pool, "closing")
			require.EqualValues(t, 41, v)
			require.EqualValues(t, 10, w)
		})
	}
}

// metric returns the value of the counter name with the label values (in
// label name order), 0 when it was never set.
func metric(b bundle, name string, labels ...string) float64 {
	mfs, err := b.reg.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := len(m.GetLabel()) == len(labels)
			for i, lp := range m.GetLabel() {
				ok = ok && lp.GetValue() == labels[i]
			}
			if ok {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func storePoolConfig() store.ConnPoolConfig { return store.ConnPoolConfig{} }

func migrate(t *testing.T, b bundle) {
	t.Helper()
	_, err := store.Migrate(context.Background(), b.pool)
	require.NoError(t, err)
}

func codeOf(err error) string { return capacityd.ErrorCode(err) }

func TestQueuedIncrementGivesUpAtItsDeadlineAndCountsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, "", store.ConnPoolConfig{}, note.Config{})
	ctx := context.Background()
	_, err := b.svc.View(ctx, "deadline")
	require.NoError(t, err)

	release := testenv.LockNote(t, b.pool, "deadline")
	first := make(chan result, 1)
	go func() { st, err := b.svc.View(ctx, "deadline"); first <- result{kind: note.View, st: st, err: err} }()
	waitLockWaiters(t, b.pool, 1)

	// Queued behind the blocked upsert, these give up at their deadline.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			qctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := b.svc.Water(qctx, "deadline")
			require.Equal(t, capacityd.EUnavailable, capacityd.ErrorCode(err), "%v", err)
			require.Less(t, time.Since(start), 5*time.Second)
		})
	}
	wg.Wait()
	release()
	r := <-first
	require.NoError(t, r.err)
	require.Equal(t, note.Stats{NoteID: "deadline", Views: 2, Waters: 0}, r.st)

	st, err := b.svc.View(ctx, "deadline")
	require.NoError(t, err)
	require.Equal(t, note.Stats{NoteID: "deadline", Views: 3, Waters: 0}, st, "abandoned increments counted nothing")
	v, w := dbStats(t, b.pool, "deadline")
	require.EqualValues(t, 3, v)
	require.EqualValues(t, 0, w)
	require.EqualValues(t, 3, b.store.upserts.Load(), "the abandoned batch needed no statement")
}

func TestConcurrentStatsReadsShareOneStatementAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t, "", store.ConnPoolConfig{MaxConns: 8}, note.Config{})
	ctx := context.Background()
	const notes, readers = 10, 500
	for i := range notes {
		for range i + 1 {
			_, err := b.svc.View(ctx, fmt.Sprint("read-", i))
			require.NoError(t, err)
		}
	}
	var start, done sync.WaitGroup
	start.Add(1)
	for r := range readers {
		done.Go(func() {
			start.Wait()
			// Notes 0..9 have 1..10 views; note 10 was never seen.
			id := r % (notes + 1)
			st, err := b.svc.Get(ctx, fmt.Sprint("read-", id))
			want := note.Stats{NoteID: fmt.Sprint("read-", id), Views: int64(id+1) % (notes + 1)}
			if err != nil || st != want {
				t.Errorf("read %v, %v; want %v", st, err, want)
			}
		})
	}
	start.Done()
	done.Wait()
	t.Logf("%d concurrent stats reads: %d statements", readers, b.store.reads.Load())
	require.EqualValues(t, 1, b.store.maxInFlight.Load(), "one read statement at a time")
	require.Less(t, b.store.reads.Load(), int64(readers/10), "reads share statements")
}
