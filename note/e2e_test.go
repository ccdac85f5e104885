package note_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/note"
)

// httpBurst sends views and waters increments of one note over HTTP,
// spread over the instance URLs, at most conc at a time, and returns every
// answer.
func httpBurst(t *testing.T, urls []string, id string, views, waters, conc int) []result {
	t.Helper()
	ks := kinds(views, waters)
	out := make([]result, len(ks))
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i, k := range ks {
		out[i].kind = k
		path := "/v1/notes/" + id + "/views"
		if k == note.Water {
			path = "/v1/notes/" + id + "/waters"
		}
		url := urls[i%len(urls)] + path
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := apptest.Do(http.MethodPost, url, "", nil)
			switch {
			case err != nil:
				out[i].err = err
			case r.Status != http.StatusOK:
				out[i].err = fmt.Errorf("status %d: %s", r.Status, r.Body)
			default:
				out[i].err = json.Unmarshal(r.Body, &out[i].st)
			}
		})
	}
	wg.Wait()
	return out
}

func TestTwoInstancesCountExactly(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{NoRedis: true})
	b := apptest.Start(t, apptest.Options{NoRedis: true, DatabaseURL: a.DatabaseURL})
	const views, waters = 5000, 1000

	res := httpBurst(t, []string{a.URL, b.URL}, "hot-note", views, waters, 256)

	// Every view caller got a distinct number in 1..5000 (so the largest
	// is 5000), every water caller one in 1..1000, and every number any
	// caller saw lies within the totals.
	requireExact(t, res, 0, 0, views, waters)
	for _, r := range res {
		require.Equal(t, "hot-note", r.st.NoteID)
	}
	v, w := dbStats(t, a.App.Pool, "hot-note")
	require.EqualValues(t, views, v)
	require.EqualValues(t, waters, w)
	var st note.Stats
	r := a.MustDo(t, http.MethodGet, "/v1/notes/hot-note/stats", "", nil)
	r.JSON(t, &st)
	require.Equal(t, note.Stats{NoteID: "hot-note", Views: views, Waters: waters}, st)
	t.Logf("upserts: instance a %v, instance b %v",
		upsertsOf(t, a), upsertsOf(t, b))
}

func upsertsOf(t testing.TB, inst *apptest.Instance) float64 {
	t.Helper()
	return metric(bundle{reg: inst.App.Registry}, "capacityd_note_upserts_total", "ok")
}

func TestSIGTERMDuringBurstLosesNothing(t *testing.T) {
	t.Parallel()
	dbURL := testenv.NewDatabase(t)
	// Rate limits would refuse most of one client's burst.
	p := apptest.StartProcess(t, dbURL, "", "RATE_LIMIT_PUBLIC_WRITES=0", "NOTE_WATER_WINDOW=0s")

	var ok, views, waters, refused atomic.Int64
	other := make(chan string, 64)
	gone := make(chan error, 1)
	var wg sync.WaitGroup
	for c := range 64 {
		wg.Go(func() {
			path, kind := "/v1/notes/sigterm/views", &views
			if c%4 == 0 {
				path, kind = "/v1/notes/sigterm/waters", &waters
			}
			for {
				r, err := apptest.Do(http.MethodPost, p.URL+path, "", nil)
				switch {
				case err != nil:
					select {
					case gone <- err:
					default:
					}
					return // the server is gone
				case r.Status == http.StatusOK:
					ok.Add(1)
					kind.Add(1)
				case r.Status == http.StatusServiceUnavailable:
					refused.Add(1)
				default:
					select {
					case other <- fmt.Sprintf("%d %s", r.Status, r.Body):
					default:
					}
					return
				}
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for ok.Load() < 2000 {
		select {
		case err := <-gone:
			t.Fatalf("a client lost the server before SIGTERM: %v", err)
		case o := <-other:
			t.Fatalf("unexpected answer before SIGTERM: %s", o)
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d answers 200 and %d 503 within 60s", ok.Load(), refused.Load())
		}
	}
	p.Signal(t, syscall.SIGTERM)
	wg.Wait()
	require.Equal(t, 0, p.Wait(30*time.Second), p.Output())
	close(other)
	for o := range other {
		t.Errorf("unexpected answer: %s", o)
	}

	pool := testenv.Pool(t, dbURL, 2)
	var v, w int64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT views, waters FROM note_stats WHERE note_id = 'sigterm'`).Scan(&v, &w))
	t.Logf("200s: %d (views %d, waters %d), 503s: %d", ok.Load(), views.Load(), waters.Load(), refused.Load())
	require.Equal(t, views.Load(), v, "views in the database = views answered 200")
	require.Equal(t, waters.Load(), w, "waters in the database = waters answered 200")
}

func TestDatabaseStoppedDuringCombinedBatch(t *testing.T) {
	t.Parallel()
	pg := testenv.PrivatePostgres(t)
	b := setup(t, pg.URL, storePoolConfig(), note.Config{})
	ctx := context.Background()
	migrate(t, b)
	_, err := b.store.AddNoteStats(ctx, "down", 11, 5)
	require.NoError(t, err)
	b.store.upserts.Store(0)

	// One upsert blocked on the note's row lock, 200 increments queued
	// behind it for the next one; then PostgreSQL stops.
	_ = testenv.LockNote(t, b.pool, "down")
	first := make(chan result, 1)
	go func() { st, err := b.svc.View(ctx, "down"); first <- result{kind: note.View, st: st, err: err} }()
	waitLockWaiters(t, b.pool, 1)
	done := make(chan []result)
	go func() { done <- burst(b.svc, "down", 160, 40) }()
	waitQueued(t, b, "down", 200)
	pg.Stop()
	res := append(<-done, <-first)

	for _, r := range res {
		require.Error(t, r.err)
		require.Equal(t, "unavailable", codeOf(r.err), "%v", r.err)
	}
	require.EqualValues(t, 2, b.store.upserts.Load(), "one upsert of 1, one combined upsert of 200")
	require.EqualValues(t, 200, b.store.maxBatch.Load())

	pg.Start(t)
	// The service recovers without a restart; the failed batches counted
	// nothing.
	var st note.Stats
	require.Eventually(t, func() bool {
		st, err = b.svc.Get(ctx, "down")
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, note.Stats{NoteID: "down", Views: 11, Waters: 5}, st)
	var views int64 = 11
	require.Eventually(t, func() bool {
		st, err := b.svc.View(ctx, "down")
		if err == nil {
			views = st.Views
		}
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	require.EqualValues(t, 12, views)
}

func TestPostgresDownIs503OverHTTP(t *testing.T) {
	t.Parallel()
	pg := testenv.PrivatePostgres(t)
	migrate(t, bundle{pool: testenv.Pool(t, pg.URL, 2)})
	inst := apptest.Start(t, apptest.Options{NoRedis: true, DatabaseURL: pg.URL})
	r := inst.MustDo(t, http.MethodPost, "/v1/notes/n1/views", "", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	pg.Stop()
	for _, req := range []struct{ method, path string }{
		{http.MethodPost, "/v1/notes/n1/views"}, {http.MethodPost, "/v1/notes/n1/waters"}, {http.MethodGet, "/v1/notes/n1/stats"},
	} {
		r := inst.MustDo(t, req.method, req.path, "", nil)
		require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
		require.Equal(t, "unavailable", r.ErrorCode(), "%s", r.Body)
		require.NotEmpty(t, r.Header.Get("Retry-After"))
	}

	pg.Start(t)
	require.Eventually(t, func() bool {
		r := inst.MustDo(t, http.MethodPost, "/v1/notes/n1/waters", "", nil)
		return r.Status == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond)
	var st note.Stats
	inst.MustDo(t, http.MethodGet, "/v1/notes/n1/stats", "", nil).JSON(t, &st)
	require.Equal(t, note.Stats{NoteID: "n1", Views: 1, Waters: 1}, st)
}
