package httpapi_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/note"
)

// startRegistered starts an instance in the registered notes mode, which
// believes X-Forwarded-For from the loopback (so that tests can speak from
// many client addresses), with the water window given (0: off).
func startRegistered(t *testing.T, waterWindow time.Duration) *apptest.Instance {
	t.Helper()
	return behindLoopbackProxy(t, apptest.Options{NoRedis: true, App: app.Options{
		Notes: note.Config{Mode: note.Registered},
		HTTP:  httpapi.Config{WaterWindow: waterWindow},
	}})
}

// noteRows counts the rows of note_stats.
func noteRows(t *testing.T, inst *apptest.Instance) int {
	t.Helper()
	var n int
	require.NoError(t, inst.App.Pool.QueryRow(t.Context(), `SELECT count(*) FROM note_stats`).Scan(&n))
	return n
}

func TestRegisteredModeUnknownNotesCreateNoRows(t *testing.T) {
	t.Parallel()
	inst := startRegistered(t, 0)
	const n = 1000
	statuses := make([]int, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			what := "views"
			if i%4 == 0 {
				what = "waters"
			}
			id := "unknown-" + strconv.FormatUint(rand.Uint64(), 36)
			r, err := apptest.Do(http.MethodPost, inst.URL+"/v1/notes/"+id+"/"+what, "", nil)
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = r.Status
			if r.Status == http.StatusNotFound && i%100 == 0 {
				requireErrorShape(t, r, http.StatusNotFound, "not_found")
			}
		})
	}
	wg.Wait()
	for i, s := range statuses {
		require.Equal(t, http.StatusNotFound, s, "request %d", i)
	}
	require.Zero(t, noteRows(t, inst), "no unknown id created a row")

	// Stats of a note never registered: 0/0 as the contract says, and
	// still no row.
	stats, err := inst.Public().NoteStats(t.Context(), "never-registered")
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: "never-registered"}, stats)
	require.Zero(t, noteRows(t, inst))

	// The same unknown id asked again and again is answered from the
	// instance's memory, without a query each.
	r := inst.MustDo(t, http.MethodPost, "/v1/notes/asked-often/views", "", nil)
	requireErrorShape(t, r, http.StatusNotFound, "not_found")
	before := inst.Queries.Count()
	for range 50 {
		r := inst.MustDo(t, http.MethodPost, "/v1/notes/asked-often/views", "", nil)
		requireErrorShape(t, r, http.StatusNotFound, "not_found")
	}
	require.Less(t, inst.Queries.Count()-before, int64(10), "repeated unknown ids are negative-cached")
	m := inst.MustDo(t, http.MethodGet, "/metrics", "", nil)
	require.Contains(t, string(m.Body), `capacityd_note_increments_total{kind="view",result="unknown"}`)
}

func TestRegisteringANote(t *testing.T) {
	t.Parallel()
	inst := startRegistered(t, 0)
	admin := inst.API(t, "admin", true)
	public := inst.Public()

	// An id found unknown a moment ago counts as soon as it is registered
	// through this instance.
	_, err := public.RecordView(t.Context(), "n-1")
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, http.StatusNotFound, ce.Status)

	st, created, err := admin.RegisterNote(t.Context(), "n-1")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, client.NoteStats{NoteID: "n-1"}, st)
	for range 3 {
		_, err := public.RecordView(t.Context(), "n-1")
		require.NoError(t, err)
	}
	w, err := public.RecordWater(t.Context(), "n-1")
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: "n-1", Views: 3, Waters: 1}, w)

	// Registering again is idempotent: 200 with the counters, nothing reset.
	st, created, err = admin.RegisterNote(t.Context(), "n-1")
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, client.NoteStats{NoteID: "n-1", Views: 3, Waters: 1}, st)
	r := inst.MustDo(t, http.MethodPut, "/v1/notes/n-1", inst.Token(t, "admin", true), "{}")
	requireNoteStats(t, r, "n-1", 3, 1)
	r = inst.MustDo(t, http.MethodPut, "/v1/notes/n-2", inst.Token(t, "admin", true), nil)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)

	// Concurrent registrations of one new note: exactly one creates it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	creations := 0
	for range 16 {
		wg.Go(func() {
			_, created, err := admin.RegisterNote(t.Context(), "raced")
			if err != nil {
				t.Error(err)
				return
			}
			if created {
				mu.Lock()
				creations++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1, creations)
	require.Equal(t, 3, noteRows(t, inst))

	// Users may not register notes.
	_, _, err = inst.API(t, "someone", false).RegisterNote(t.Context(), "n-3")
	require.ErrorAs(t, err, &ce)
	require.Equal(t, http.StatusForbidden, ce.Status)

	// The demo page's note is registered at start in this mode.
	require.NoError(t, inst.App.RegisterDemoNote(t.Context()))
	_, err = public.RecordView(t.Context(), httpapi.DemoNoteID)
	require.NoError(t, err)
}

func TestOpenModeDoesNotRegisterTheDemoNote(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{NoRedis: true})
	require.NoError(t, inst.App.RegisterDemoNote(t.Context()))
	require.Zero(t, noteRows(t, inst), "open mode needs no registration")
	// Registering is allowed in open mode too (before switching modes).
	st, created, err := inst.API(t, "admin", true).RegisterNote(t.Context(), "early")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, client.NoteStats{NoteID: "early"}, st)
}

// TestRegisteredNoteCountsExactlyUnderConcurrency sends views and waters
// of one registered note (and of unknown ones) from many goroutines: the
// note's counters are exactly the number of 200s of each kind.
func TestRegisteredNoteCountsExactlyUnderConcurrency(t *testing.T) {
	t.Parallel()
	inst := startRegistered(t, 0)
	_, _, err := inst.API(t, "admin", true).RegisterNote(t.Context(), "hot")
	require.NoError(t, err)
	const workers, each = 32, 40
	var mu sync.Mutex
	ok := map[string]int64{}
	other := map[int]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				what := "views"
				if (w+i)%3 == 0 {
					what = "waters"
				}
				id := "hot"
				if i%10 == 9 {
					id = fmt.Sprintf("cold-%d-%d", w, i) // unknown, in the same batches' time
				}
				r, err := apptest.Do(http.MethodPost, inst.URL+"/v1/notes/"+id+"/"+what, "", nil)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if id == "hot" && r.Status == http.StatusOK {
					ok[what]++
				} else {
					other[r.Status]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusNotFound: workers * each / 10}, other)
	require.Equal(t, int64(workers*each*9/10), ok["views"]+ok["waters"])
	stats, err := inst.Public().NoteStats(t.Context(), "hot")
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: "hot", Views: ok["views"], Waters: ok["waters"]}, stats)
	require.Equal(t, 1, noteRows(t, inst))
}

// TestWatersAreLimitedPerAddressPerNote waters from several client
// addresses (forwarded by a trusted proxy): one water per address per note
// per window; another address, or another note, is not affected; refused
// waters and waters of unknown notes count nothing and hold no place.
func TestWatersAreLimitedPerAddressPerNote(t *testing.T) {
	t.Parallel()
	inst := startRegistered(t, time.Hour)
	for _, id := range []string{"liked", "other"} {
		_, _, err := inst.API(t, "admin", true).RegisterNote(t.Context(), id)
		require.NoError(t, err)
	}
	water := func(addr, id string) apptest.Response {
		return inst.MustDo(t, http.MethodPost, "/v1/notes/"+id+"/waters", "", nil, "X-Forwarded-For", addr)
	}
	requireNoteStats(t, water("198.51.100.1", "liked"), "liked", 0, 1)
	r := water("198.51.100.1", "liked")
	requireErrorShape(t, r, http.StatusTooManyRequests, "rate_limited")
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.Greater(t, secs, 3500, "the rest of the hour")
	// Another address, and another note, are not affected.
	requireNoteStats(t, water("198.51.100.2", "liked"), "liked", 0, 2)
	requireNoteStats(t, water("198.51.100.1", "other"), "other", 0, 1)
	// Views are not limited this way.
	for range 3 {
		r := inst.MustDo(t, http.MethodPost, "/v1/notes/liked/views", "", nil, "X-Forwarded-For", "198.51.100.1")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	// A water of an unknown note is 404 and holds no place: once the note
	// is registered, the same address waters it at once.
	requireErrorShape(t, water("198.51.100.1", "later"), http.StatusNotFound, "not_found")
	_, _, err = inst.API(t, "admin", true).RegisterNote(t.Context(), "later")
	require.NoError(t, err)
	requireNoteStats(t, water("198.51.100.1", "later"), "later", 0, 1)

	// Many concurrent waters from one address of one note: exactly one
	// counts.
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for range 20 {
		wg.Go(func() {
			r, err := apptest.Do(http.MethodPost, inst.URL+"/v1/notes/other/waters", "", nil, "X-Forwarded-For", "203.0.113.9")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			statuses[r.Status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusOK: 1, http.StatusTooManyRequests: 19}, statuses)
	stats, err := inst.Public().NoteStats(t.Context(), "liked")
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: "liked", Views: 3, Waters: 2}, stats)
	stats, err = inst.Public().NoteStats(t.Context(), "other")
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: "other", Views: 0, Waters: 2}, stats)
}
