package httpapi_test

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

func TestActivitiesListNewestFirst(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	var want []string
	for i := range 5 {
		want = append([]string{inst.CreateActivity(t, fmt.Sprint("listed ", i), i)}, want...)
	}
	admin := inst.API(t, "admin", true)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		page, err := admin.ListActivities(t.Context(), client.ListOptions{Limit: 2, Cursor: cursor})
		require.NoError(t, err)
		for _, a := range page.Items {
			got = append(got, a.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	require.Equal(t, want, got)
	_, err := inst.API(t, "u", false).ListActivities(t.Context(), client.ListOptions{})
	require.Equal(t, http.StatusForbidden, apptest.Refusal(t, err).Status)
	_, err = admin.ListActivities(t.Context(), client.ListOptions{Limit: 501})
	require.Equal(t, http.StatusBadRequest, apptest.Refusal(t, err).Status)
}

// TestExportWritesEveryRegistrationAsCSV reads the CSV as it is sent.
func TestExportWritesEveryRegistrationAsCSV(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "export", 5)
	adminToken := inst.Token(t, "admin", true)
	admin := inst.API(t, "admin", true)
	r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/registrations.csv", adminToken, nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "id,user_id,status,created_at,updated_at,expires_at,metadata,seats,block_id\n", string(r.Body), "no registration: the header alone")

	ra := inst.MustSignup(t, id, "alice", client.SignupOptions{Metadata: map[string]string{"seat": `front, "left"`}})
	rb := inst.MustSignup(t, id, "bob")
	rb, err := admin.SetRegistrationStatus(ctx, rb.ID, client.AwaitingPayment)
	require.NoError(t, err)

	r = inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/registrations.csv", adminToken, nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "text/csv; charset=utf-8", r.Header.Get("Content-Type"))
	recs, err := csv.NewReader(strings.NewReader(string(r.Body))).ReadAll()
	require.NoError(t, err)
	stamp := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	require.Equal(t, [][]string{
		{"id", "user_id", "status", "created_at", "updated_at", "expires_at", "metadata", "seats", "block_id"},
		{ra.ID, "alice", "pending", stamp(ra.CreatedAt), stamp(ra.UpdatedAt), "", `{"seat":"front, \"left\""}`, "1", ""},
		{rb.ID, "bob", "awaiting_payment", stamp(rb.CreatedAt), stamp(rb.UpdatedAt), stamp(*rb.ExpiresAt), "{}", "1", ""},
	}, recs)

	r = inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/registrations.csv?status=pending", adminToken, nil)
	require.Equal(t, 2, strings.Count(string(r.Body), "\n"), "the header and alice")
	_, err = admin.ExportRegistrations(ctx, id, "gone")
	require.Equal(t, client.CodeInvalidRequest, apptest.Refusal(t, err).Code)
	_, err = inst.API(t, "alice", false).ExportRegistrations(ctx, id, "")
	require.Equal(t, http.StatusForbidden, apptest.Refusal(t, err).Status)
	_, err = admin.ExportRegistrations(ctx, "a_01AAAAAAAAAAAAAAAAAAAAAAAA", "")
	require.Equal(t, http.StatusNotFound, apptest.Refusal(t, err).Status)
}

// TestExportOfManyRowsRunsInConstantMemory streams a 100,000-row export
// and measures this process's live heap (capacityd runs in it) every few
// milliseconds while the rows pass: it must stay flat, far below the
// export's size. Not parallel: no other test allocates meanwhile.
func TestExportOfManyRowsRunsInConstantMemory(t *testing.T) {
	const rows = 100_000
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "big export", rows)
	pool := testenv.Pool(t, inst.DatabaseURL, 2)
	// The seed is no part of what is measured: it may take longer than
	// the pool's statement timeout on a busy machine.
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `SET LOCAL statement_timeout = '5min'`); err != nil {
			return err
		}
		_, err := tx.Exec(context.Background(), `
			INSERT INTO registration (public_id, activity_id, user_id, status, metadata)
			SELECT 'r_01EXPORT' || lpad(g::text, 17, '0'), a.id, 'user-' || g, 'approved',
			       json_build_object('note', repeat('x', 120), 'n', g)
			FROM activity a, generate_series(1, $2) g WHERE a.public_id = $1`, id, rows)
		return err
	})
	require.NoError(t, err)

	live := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := live()
	stop := make(chan struct{})
	var peak uint64
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			peak = max(peak, live())
		}
	})

	req, err := http.NewRequest(http.MethodGet, inst.URL+"/v1/activities/"+id+"/registrations.csv", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+inst.Token(t, "admin", true))
	// This test measures memory, not time: a loaded machine under -race
	// may take longer than the shared client's 30 s to stream 26 MB.
	client := *apptest.Client
	client.Timeout = 5 * time.Minute
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var size int64
	lines := 0
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadSlice('\n')
		size += int64(len(line))
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		lines++
		if lines%2000 == 0 {
			time.Sleep(time.Millisecond) // a slow reader: the server must wait, not buffer
		}
	}
	close(stop)
	sampler.Wait()
	require.Equal(t, rows+1, lines, "the header and every row")
	growth := int64(peak) - int64(base)
	t.Logf("exported %d rows, %.1f MB; live heap %.1f MB before, peak %.1f MB during (+%.1f MB)",
		rows, float64(size)/1e6, float64(base)/1e6, float64(peak)/1e6, float64(growth)/1e6)
	require.Greater(t, size, int64(15e6))
	require.Less(t, growth, int64(4e6), "the export's memory must not grow with its rows")
}

// TestExportNeutralisesFormulas: a field a spreadsheet would run as a
// formula (a user id starting with =, +, - or @) is written with a
// leading ', which spreadsheets show as text.
func TestExportNeutralisesFormulas(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "formulas", 10)
	users := []string{`=HYPERLINK("http://x","y")`, "+1", "-2", "@SUM(A1)", "plain"}
	for _, u := range users {
		inst.MustSignup(t, id, u)
	}
	r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/registrations.csv", inst.Token(t, "admin", true), nil)
	require.Equal(t, http.StatusOK, r.Status)
	recs, err := csv.NewReader(strings.NewReader(string(r.Body))).ReadAll()
	require.NoError(t, err)
	var got []string
	for _, rec := range recs[1:] {
		got = append(got, rec[1])
	}
	require.Equal(t, []string{`'=HYPERLINK("http://x","y")`, "'+1", "'-2", "'@SUM(A1)", "plain"}, got)
}
