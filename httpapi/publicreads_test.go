package httpapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/stream"
	"github.com/physiciansnet/capacityd/webhook"
)

func TestPublicActivityReadComesFromTheDisplayAndAnAdminsFromTheAuthority(t *testing.T) {
	t.Parallel()
	// The instance's background work (expiry, reconciliation, webhook
	// polls) is put off, so that its statements are the reads' alone.
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		ActivityCacheTTL:  time.Hour,
		ExpiryInterval:    time.Hour,
		ReconcileInterval: time.Hour,
		Webhooks:          webhook.DispatcherConfig{PollInterval: time.Hour, BacklogInterval: time.Hour},
		OnSale:            onsale.Options{Tick: time.Hour},
	}})
	id := inst.CreateActivity(t, "display", 10)
	inst.MustSignup(t, id, "u1")
	inst.MustSignup(t, id, "u2") // the commits build the display counter
	ctx := context.Background()
	// As another instance's announcement of a change would (one that the
	// authority does not have here): the display shows three more seats
	// taken than the authority.
	require.Eventually(t, inst.App.Changes.Healthy, 10*time.Second, 10*time.Millisecond)
	st, err := inst.App.Store.SeatState(ctx, id)
	require.NoError(t, err)
	announce := func(c capacity.SeatChange) {
		require.NoError(t, inst.App.Redis.Publish(ctx, stream.Channel, c.Encode()).Err())
	}
	announce(capacity.SeatChange{ActivityID: id, Activity: &capacity.ActivitySeats{Prev: st.LastSeq, Seq: st.LastSeq + 1,
		Version: st.UpdatedAt.UnixMicro(), Capacity: 10, Taken: 5}})
	require.Eventually(t, func() bool {
		a, err := inst.Public().GetActivity(ctx, id)
		return err == nil && a.Taken == 5
	}, 10*time.Second, 10*time.Millisecond)

	queries := inst.Queries.Count()
	for range 20 {
		a, err := inst.Public().GetActivity(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "cache", a.Source)
		require.Equal(t, "display", a.Title)
		require.Equal(t, 10, a.Capacity)
		require.Equal(t, 5, a.Taken, "the display's taken")
		require.Equal(t, 5, a.Remaining)
		require.Equal(t, 900, a.HoldSeconds)
	}
	require.Equal(t, queries, inst.Queries.Count(), "public reads of a cached activity with a warm display send no statement")

	// A user's token does not make the numbers authoritative; an admin's
	// does.
	a, err := inst.API(t, "u1", false).GetActivity(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "cache", a.Source)
	require.Equal(t, 5, a.Taken)
	a, err = inst.API(t, "admin", true).GetActivity(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "database", a.Source)
	require.Equal(t, 2, a.Taken, "the authority's taken")
	require.Equal(t, 8, a.Remaining)
	// An invalid token is an anonymous caller on a public route.
	r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+id, "not-a-token", nil)
	require.Equal(t, http.StatusOK, r.Status)
	var body client.Activity
	r.JSON(t, &body)
	require.Equal(t, "cache", body.Source)

	// Without a display counter (and the memory told to read again), the
	// seats come from the authority, and say so.
	require.NoError(t, inst.App.Redis.Del(ctx, capacity.Key(id)).Err())
	announce(capacity.SeatChange{ActivityID: id})
	require.Eventually(t, func() bool {
		a, err = inst.Public().GetActivity(ctx, id)
		return err == nil && a.Source == "database"
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 2, a.Taken)
}

func TestActivityChangesReachPublicReadsWithinTheTTL(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	db := apptest.Start(t, apptest.Options{App: app.Options{ActivityCacheTTL: ttl}})
	other := apptest.Start(t, apptest.Options{DatabaseURL: db.DatabaseURL, App: app.Options{ActivityCacheTTL: ttl}})
	ctx := context.Background()
	id := db.CreateActivity(t, "before", 5)
	db.MustSignup(t, id, "u1")
	a, err := other.Public().GetActivity(ctx, id) // cached on the other instance
	require.NoError(t, err)
	require.Equal(t, "before", a.Title)
	require.Equal(t, 5, a.Capacity)

	capacity, title := 7, "after"
	changed, err := db.API(t, "admin", true).UpdateActivity(ctx, id, client.ActivityPatch{Capacity: &capacity, Title: &title})
	require.NoError(t, err)
	// The instance that made the change shows it at once.
	a, err = db.Public().GetActivity(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "after", a.Title)
	require.Equal(t, 7, a.Capacity)
	require.Equal(t, 6, a.Remaining)
	require.Equal(t, changed.UpdatedAt, a.UpdatedAt)
	// The capacity is the display tier's, shared by every instance: the
	// other shows it at once too; its settings within the TTL.
	a, err = other.Public().GetActivity(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 7, a.Capacity)
	require.Equal(t, 6, a.Remaining)
	require.Eventually(t, func() bool {
		a, err := other.Public().GetActivity(ctx, id)
		return err == nil && a.Title == "after" && a.UpdatedAt.Equal(changed.UpdatedAt)
	}, 10*ttl, ttl/10)
}

// randomActivityID returns a well-formed activity id that names nothing.
func randomActivityID(rng *rand.Rand) string {
	const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	b := []byte("a_")
	for range 26 {
		b = append(b, crockford[rng.IntN(len(crockford))])
	}
	return string(b)
}

func TestUnknownActivityReadsReachPostgresAHandfulOfTimes(t *testing.T) {
	t.Parallel()
	// The instance's background work is put off, so that its statements
	// are the reads' alone. Its requests get a minute: 10,000 at once under
	// -race on a machine busy with the rest of the suite can take longer
	// than the default 10 s, and a read past its deadline is a 503 by
	// design; what is measured here is the statements.
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		ExpiryInterval:    time.Hour,
		ReconcileInterval: time.Hour,
		RequestTimeout:    time.Minute,
		Webhooks:          webhook.DispatcherConfig{PollInterval: time.Hour, BacklogInterval: time.Hour},
		OnSale:            onsale.Options{Tick: time.Hour},
	}})
	// The documented shape, through the checked client; the statement
	// counter sees the lookup of an unknown id.
	before := inst.Queries.Count()
	r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+randomActivityID(rand.New(rand.NewPCG(1, 1)))+"/seats", "", nil)
	requireErrorShape(t, r, http.StatusNotFound, "not_found")
	require.Greater(t, inst.Queries.Count(), before, "a lookup of an unknown id is a statement")
	before = inst.Queries.Count()

	// Straight into the handler, so that 10,000 reads are in flight at
	// once without as many sockets.
	h := inst.App.Server.Handler()
	rng := rand.New(rand.NewPCG(2, 2))
	paths := make([]string, 10_000)
	for i := range paths {
		id := randomActivityID(rng)
		if i%4 == 3 { // malformed: lower case, or the wrong prefix
			id = strings.ToLower(id)
			if i%8 == 7 {
				id = "r" + id[1:]
			}
		}
		switch i % 3 {
		case 0:
			paths[i] = "/v1/activities/" + id
		case 1:
			paths[i] = "/v1/activities/" + id + "/seats"
		default:
			paths[i] = "/v1/activities/" + id + "/seats/stream"
		}
	}
	var start, done sync.WaitGroup
	start.Add(1)
	var notFound atomic.Int64
	statuses := make([]int, len(paths))
	for i, p := range paths {
		done.Go(func() {
			start.Wait()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, p, nil))
			statuses[i] = w.Code
			if w.Code == http.StatusNotFound && strings.Contains(w.Body.String(), `"code":"not_found"`) {
				notFound.Add(1)
			}
		})
	}
	start.Done()
	done.Wait()
	for i, s := range statuses {
		require.Equal(t, http.StatusNotFound, s, "%s", paths[i])
	}
	require.Equal(t, int64(len(paths)), notFound.Load())

	n := inst.Queries.Count() - before
	t.Logf("10,000 reads of unknown activity ids: %d statements sent to PostgreSQL", n)
	// Concurrent lookups share one statement: how many batches form
	// depends on scheduling (a handful on a quiet machine, a few dozen
	// under a loaded make test), never one statement per read.
	require.LessOrEqual(t, n, int64(100), "at most 1 %% of the reads reach PostgreSQL")
}

func TestPublicReadsThatReachPostgresAreRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		ActivityCacheTTL: time.Hour,
		HTTP:             httpapi.Config{PublicReadLimit: httpapi.RateLimit{PerSecond: 0.01, Burst: 3}},
	}})
	known := inst.CreateActivity(t, "known", 10)
	rng := rand.New(rand.NewPCG(3, 3))
	unknown := []string{randomActivityID(rng), randomActivityID(rng), randomActivityID(rng), randomActivityID(rng)}
	for _, id := range unknown[:3] {
		requireErrorShape(t, inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/seats", "", nil), http.StatusNotFound, "not_found")
	}
	r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+unknown[3], "", nil)
	requireErrorShape(t, r, http.StatusTooManyRequests, "rate_limited")
	require.NotEmpty(t, r.Header.Get("Retry-After"))
	// What the caches answer is never limited: an id known to name
	// nothing, a known activity, its seats and its stream.
	for range 10 {
		requireErrorShape(t, inst.MustDo(t, http.MethodGet, "/v1/activities/"+unknown[0], "", nil), http.StatusNotFound, "not_found")
		a, err := inst.Public().GetActivity(t.Context(), known)
		require.NoError(t, err)
		require.Equal(t, "known", a.Title)
		_, err = inst.Public().Seats(t.Context(), known)
		require.NoError(t, err)
	}
	openStream(t, inst.URL, known).Next(t, time.Second)
	m := inst.MustDo(t, http.MethodGet, "/metrics", "", nil)
	require.Contains(t, string(m.Body), `capacityd_rate_limited_total{limit="public_reads"} 1`)
}

func TestNoteStatsReadsAreLimitedPerAddress(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{NoRedis: true, App: app.Options{
		HTTP: httpapi.Config{PublicReadLimit: httpapi.RateLimit{PerSecond: 0.01, Burst: 2}},
	}})
	for range 2 {
		requireNoteStats(t, inst.MustDo(t, http.MethodGet, "/v1/notes/limited/stats", "", nil), "limited", 0, 0)
	}
	requireErrorShape(t, inst.MustDo(t, http.MethodGet, "/v1/notes/limited/stats", "", nil), http.StatusTooManyRequests, "rate_limited")
	// Increments are not public reads.
	_, err := inst.Public().RecordView(t.Context(), "limited")
	require.NoError(t, err)
}

func TestNoteStatsIncludeEveryAcknowledgedIncrement(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{NoRedis: true})
	public := inst.Public()
	ctx := t.Context()
	notes := []string{"acked-a", "acked-b", "acked-c"}
	const perNote = 150
	var acked [3]struct{ views, waters atomic.Int64 }
	stop := make(chan struct{})
	var readers, writers sync.WaitGroup
	var reads atomic.Int64
	// Readers check every answer against the increments acknowledged
	// before they asked.
	for r := range 16 {
		readers.Go(func() {
			for i := r; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := i % len(notes)
				views, waters := acked[n].views.Load(), acked[n].waters.Load()
				st, err := public.NoteStats(ctx, notes[n])
				if !assert.NoError(t, err) {
					return
				}
				reads.Add(1)
				if st.Views < views || st.Waters < waters {
					t.Errorf("%s: read %d views and %d waters after %d and %d were acknowledged", notes[n], st.Views, st.Waters, views, waters)
					return
				}
			}
		})
	}
	for n, id := range notes {
		for i := range perNote {
			writers.Go(func() {
				var err error
				if i%3 == 0 {
					_, err = public.RecordWater(ctx, id)
					if err == nil {
						acked[n].waters.Add(1)
					}
				} else {
					_, err = public.RecordView(ctx, id)
					if err == nil {
						acked[n].views.Add(1)
					}
				}
				assert.NoError(t, err)
			})
		}
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	t.Logf("%d stats reads during the increments", reads.Load())
	for _, id := range notes {
		st, err := public.NoteStats(ctx, id)
		require.NoError(t, err)
		require.Equal(t, client.NoteStats{NoteID: id, Views: perNote * 2 / 3, Waters: perNote / 3}, st, fmt.Sprint("note ", id))
	}
}
