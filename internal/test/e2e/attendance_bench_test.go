package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// BenchmarkAttendanceOfTwoThousand reads the attendance of an activity of
// 2,000 registrations and 10,000 check-ins over two lists: one GET of a
// full page (limit 500) with the whole activity's summary, through the
// HTTP API (without the tests' API description check, which is not the
// service's cost). The data are written with bulk INSERTs. It must stay
// well under 200 ms.
func BenchmarkAttendanceOfTwoThousand(b *testing.B) {
	inst := apptest.Start(b, apptest.Options{})
	act := inst.CreateActivity(b, "congress", 2000)
	start := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Minute)
	admin := inst.Token(b, "admin", true)
	r := inst.MustDo(b, http.MethodPatch, "/v1/activities/"+act, admin, map[string]any{
		"starts_at": start, "ends_at": start.Add(time.Hour), "attendance_percent": 80})
	require.Equal(b, http.StatusOK, r.Status, "%s", r.Body)
	lists := make([]string, 2)
	for i := range lists {
		r := inst.MustDo(b, http.MethodPost, "/v1/checkin-lists", admin, map[string]any{"name": "door", "activity_ids": []string{act}})
		require.Equal(b, http.StatusCreated, r.Status, "%s", r.Body)
		var l listAnswer
		r.JSON(b, &l)
		lists[i] = l.ID
	}
	seedAttendance(b, inst, act, lists, start)

	url := inst.URL + "/v1/activities/" + act + "/attendance?limit=500"
	get := func() []byte {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode, "%s", body)
		return body
	}
	var page struct {
		Summary struct {
			Registered int `json:"registered"`
			CheckedIn  int `json:"checked_in"`
		} `json:"summary"`
		Items []json.RawMessage `json:"items"`
	}
	require.NoError(b, json.Unmarshal(get(), &page))
	require.Len(b, page.Items, 500)
	require.Equal(b, 2000, page.Summary.Registered)
	require.Equal(b, 1600, page.Summary.CheckedIn)
	var slowest time.Duration
	for b.Loop() {
		t0 := time.Now()
		get()
		slowest = max(slowest, time.Since(t0))
	}
	b.ReportMetric(float64(slowest.Microseconds())/1000, "max-ms")
}

// seedAttendance writes 2,000 approved registrations of the activity and
// five check-ins each (10,000): four in five registrations come (in
// through the first list, out, in and out through the second, which
// overlaps, and in again), the fifth have exits alone (no-shows).
func seedAttendance(b *testing.B, inst *apptest.Instance, act string, lists []string, start time.Time) {
	ctx := context.Background()
	db := inst.App.Pool
	_, err := db.Exec(ctx, `INSERT INTO registration (public_id, activity_id, user_id, status, seats)
		SELECT 'r_' || lpad(g::text, 26, '0'), a.id, 'user-' || g, 'approved', 1
		FROM activity a, generate_series(1, 2000) g WHERE a.public_id = $1`, act)
	require.NoError(b, err)
	_, err = db.Exec(ctx, `INSERT INTO checkin (list_id, seq, registration_id, activity_id, type, at, device, seats, actor)
		SELECT CASE WHEN k IN (2, 3) THEN l2.id ELSE l1.id END, row_number() OVER (), r.id, r.activity_id,
			CASE WHEN r.id % 5 = 0 OR k IN (1, 3) THEN 'exit' ELSE 'entry' END,
			$4::timestamptz + ((ARRAY[0, 25, 20, 40, 45])[k + 1] + r.id % 7) * interval '1 minute', 'bench', 1, 'admin:bench'
		FROM registration r JOIN activity a ON a.id = r.activity_id
		CROSS JOIN generate_series(0, 4) k
		JOIN checkin_list l1 ON l1.public_id = $2 JOIN checkin_list l2 ON l2.public_id = $3
		WHERE a.public_id = $1`, act, lists[0], lists[1], start)
	require.NoError(b, err)
	_, err = db.Exec(ctx, `ANALYZE registration, checkin`)
	require.NoError(b, err)
}
