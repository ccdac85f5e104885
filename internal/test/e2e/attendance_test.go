package e2e

import (
	"bytes"
	"context"
	"encoding/csv"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// upload records a forced scan of a registration at a time, as an offline
// device uploads the scans it accepted.
func upload(t *testing.T, d door, regID string, typ string, at time.Time) {
	t.Helper()
	r := d.scan(t, 0, d.admin, map[string]any{"registration_id": regID, "device": "d", "force": true, "type": typ,
		"at": at.UTC().Format(time.RFC3339)})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}

// schedule sets an activity's times (and its threshold when percent > 0).
func schedule(t *testing.T, inst *apptest.Instance, activityID string, starts, ends time.Time, percent int) {
	t.Helper()
	p := client.ActivityPatch{StartsAt: &starts, EndsAt: &ends}
	if percent > 0 {
		p.AttendancePercent = &percent
	}
	_, err := inst.API(t, "admin", true).UpdateActivity(context.Background(), activityID, p)
	require.NoError(t, err)
}

// seminar is a 60-minute activity that ended two hours ago, with a
// threshold of 80 %, attended through two doors: alice 25 + 25 minutes,
// bob 5, "=carol" not at all (a name a spreadsheet would run), dave
// through the hall from before the start and through the side door,
// overlapping, without leaving (the whole hour, once); eve cancelled.
type seminar struct {
	inst  *apptest.Instance
	act   string
	start time.Time
	regs  map[string]client.Registration
	hall  door
}

// at is the seminar's start plus m minutes.
func (s seminar) at(m int) time.Time { return s.start.Add(time.Duration(m) * time.Minute) }

func newSeminar(t *testing.T) seminar {
	t.Helper()
	inst := apptest.Start(t, apptest.Options{})
	s := seminar{inst: inst, act: inst.CreateActivity(t, "seminar", 10),
		start: time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Minute), regs: map[string]client.Registration{}}
	for _, user := range []string{"alice", "bob", "=carol", "dave", "eve"} {
		s.regs[user] = inst.MustSignup(t, s.act, user)
	}
	_, err := inst.API(t, "eve", false).CancelRegistration(context.Background(), s.regs["eve"].ID)
	require.NoError(t, err)
	s.hall = newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "Hall", "activity_ids": []string{s.act}, "entry": "reentry"})
	hall := s.hall
	side := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "Side", "activity_ids": []string{s.act}, "entry": "reentry"})
	for _, u := range []struct {
		d      door
		user   string
		typ    string
		minute int
	}{
		{hall, "alice", "entry", 0}, {hall, "alice", "exit", 25}, {hall, "alice", "entry", 30}, {hall, "alice", "exit", 55},
		{hall, "bob", "entry", 10}, {hall, "bob", "exit", 15},
		{hall, "dave", "entry", -20}, {side, "dave", "entry", 20}, {hall, "dave", "exit", 30},
	} {
		upload(t, u.d, s.regs[u.user].ID, u.typ, s.at(u.minute))
	}
	schedule(t, inst, s.act, s.start, s.at(60), 80)
	return s
}

func TestAttendanceFromEntriesAndExits(t *testing.T) {
	t.Parallel()
	s := newSeminar(t)
	items := s.checkItems(t)
	t.Run("statement", func(t *testing.T) { s.checkStatement(t, items[0]) })
	t.Run("csv", s.checkCSV)
	t.Run("refusals", s.checkRefusals)
}

// checkItems reads the attendance in two pages and checks the summary and
// every item; it returns the items.
func (s seminar) checkItems(t *testing.T) []client.AttendanceItem {
	ctx := context.Background()
	admin := s.inst.API(t, "admin", true)
	page, err := admin.ActivityAttendance(ctx, s.act, "", 3)
	require.NoError(t, err)
	assert.Equal(t, client.AttendanceSummary{Registered: 4, CheckedIn: 3, NoShow: 1, NoShowRate: 0.25}, page.Summary)
	require.Len(t, page.Items, 3)
	require.NotNil(t, page.NextCursor)
	more, err := admin.ActivityAttendance(ctx, s.act, *page.NextCursor, 3)
	require.NoError(t, err)
	assert.Nil(t, more.NextCursor)
	assert.Equal(t, page.Summary, more.Summary, "every page carries the whole activity's summary")
	items := append(page.Items, more.Items...)
	require.Len(t, items, 4, "the cancelled registration holds no seat")

	want := []struct {
		user     string
		first    *time.Time
		seconds  int
		percent  float64
		eligible bool
	}{
		{"alice", ptr(s.at(0)), 3000, 83.3, true},
		{"bob", ptr(s.at(10)), 300, 8.3, false},
		{"=carol", nil, 0, 0, false},
		{"dave", ptr(s.at(-20)), 3600, 100, true},
	}
	for i, w := range want {
		it := items[i]
		assert.Equal(t, s.regs[w.user].ID, it.RegistrationID, "creation order")
		assert.Equal(t, w.user, it.UserID)
		assert.Equal(t, 1, it.Seats)
		assert.Equal(t, s.regs[w.user].Status, it.Status, "as the signup left it")
		assert.Equal(t, w.first != nil, it.CheckedIn, w.user)
		if w.first == nil {
			assert.Nil(t, it.FirstEntryAt, w.user)
		} else if assert.NotNil(t, it.FirstEntryAt, w.user) {
			assert.True(t, w.first.Equal(*it.FirstEntryAt), w.user)
		}
		require.NotNil(t, it.Seconds, w.user)
		require.NotNil(t, it.Percent, w.user)
		assert.Equal(t, w.seconds, *it.Seconds, w.user)
		assert.InDelta(t, w.percent, *it.Percent, 1e-9, w.user)
		assert.Equal(t, w.eligible, it.Eligible, w.user)
	}
	return items
}

// checkStatement reads alice's attendance as alice and verifies its
// statement with the published keys alone.
func (s seminar) checkStatement(t *testing.T, alice client.AttendanceItem) {
	ctx := context.Background()
	mine, err := s.inst.API(t, "alice", false).RegistrationAttendance(ctx, alice.RegistrationID)
	require.NoError(t, err)
	assert.Equal(t, alice, mine.AttendanceItem)
	require.NotNil(t, mine.Statement, "the activity has ended")
	claims := verifyStatement(t, s.inst, *mine.Statement)
	assert.Equal(t, alice.RegistrationID, claims["reg"])
	assert.Equal(t, s.act, claims["act"])
	assert.Equal(t, "alice", claims["sub"])
	assert.Equal(t, s.start.Format(time.RFC3339), claims["starts_at"])
	assert.Equal(t, s.at(60).Format(time.RFC3339), claims["ends_at"])
	assert.Equal(t, 3000.0, claims["seconds"])
	assert.Equal(t, 83.3, claims["percent"])
	assert.Equal(t, true, claims["eligible"])
	assert.InDelta(t, float64(time.Now().Unix()), claims["iat"], 120)
	r := s.hall.scan(t, 0, s.hall.admin, map[string]any{"ticket": *mine.Statement, "device": "d"})
	assert.Equal(t, "invalid_ticket", r.ErrorCode(), "a statement is never taken for a ticket")

	byAdmin, err := s.inst.API(t, "admin", true).RegistrationAttendance(ctx, s.regs["bob"].ID)
	require.NoError(t, err)
	assert.False(t, byAdmin.Eligible)
	require.NotNil(t, byAdmin.Statement)
	assert.Equal(t, false, verifyStatement(t, s.inst, *byAdmin.Statement)["eligible"])
	_, err = s.inst.API(t, "bob", false).RegistrationAttendance(ctx, alice.RegistrationID)
	assert.Equal(t, "not_found", apptest.Refusal(t, err).Code, "only its owner or an admin")
}

// checkCSV reads the export.
func (s seminar) checkCSV(t *testing.T) {
	r := s.inst.MustDo(t, http.MethodGet, "/v1/activities/"+s.act+"/attendance.csv", s.inst.Token(t, "admin", true), nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "text/csv"))
	rows, err := csv.NewReader(bytes.NewReader(r.Body)).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 5)
	assert.Equal(t, []string{"registration_id", "user_id", "seats", "status", "checked_in", "first_entry_at", "seconds", "percent", "eligible"}, rows[0])
	alice, carol := s.regs["alice"], s.regs["=carol"]
	assert.Equal(t, []string{alice.ID, "alice", "1", string(alice.Status), "true", s.at(0).Format(time.RFC3339Nano), "3000", "83.3", "true"}, rows[1])
	assert.Equal(t, []string{carol.ID, "'=carol", "1", string(carol.Status), "false", "", "0", "0", "false"}, rows[3],
		"an empty cell for null, and a formula made inert")
}

// checkRefusals checks the ids, cursors and limits refused.
func (s seminar) checkRefusals(t *testing.T) {
	tok := s.inst.Token(t, "admin", true)
	for path, code := range map[string]string{
		"/v1/activities/a_01ARZ3NDEKTSV4RRFFQ69G5FAV/attendance":     "not_found",
		"/v1/activities/nope/attendance":                             "not_found",
		"/v1/activities/a_01ARZ3NDEKTSV4RRFFQ69G5FAV/attendance.csv": "not_found",
		"/v1/registrations/r_01ARZ3NDEKTSV4RRFFQ69G5FAV/attendance":  "not_found",
		"/v1/activities/" + s.act + "/attendance?cursor=%21%21":      "invalid_request",
		"/v1/activities/" + s.act + "/attendance?limit=0":            "invalid_request",
		"/v1/activities/" + s.act + "/attendance?limit=501":          "invalid_request",
		"/v1/activities/" + s.act + "/attendance?status=approved":    "invalid_request",
	} {
		assert.Equal(t, code, s.inst.MustDo(t, http.MethodGet, path, tok, nil).ErrorCode(), path)
	}
	r := s.inst.MustDo(t, http.MethodGet, "/v1/activities/"+s.act+"/attendance", s.inst.Token(t, "alice", false), nil)
	assert.Equal(t, http.StatusForbidden, r.Status, "admins only")
}

func ptr[T any](v T) *T { return &v }

// verifyStatement checks a statement with the published key set alone,
// through an outside JOSE library, and returns its claims.
func verifyStatement(t *testing.T, inst *apptest.Instance, statement string) jwt.MapClaims {
	t.Helper()
	keys := inst.MustDo(t, http.MethodGet, "/v1/checkin/keys", "", nil)
	require.Equal(t, http.StatusOK, keys.Status)
	kf, err := keyfunc.NewJWKSetJSON(keys.Body)
	require.NoError(t, err)
	parsed, err := jwt.Parse(statement, kf.Keyfunc, jwt.WithValidMethods([]string{"EdDSA"}))
	require.NoError(t, err, "the statement verifies with GET /v1/checkin/keys")
	assert.Equal(t, "capacityd-attendance+jwt", parsed.Header["typ"])
	return parsed.Claims.(jwt.MapClaims)
}

func TestAttendanceBeforeTheEndAndWithoutTimes(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ctx := context.Background()
	live := inst.CreateActivity(t, "live", 5)
	loose := inst.CreateActivity(t, "untimed", 5)
	frank := inst.MustSignup(t, live, "frank")
	gina := inst.MustSignup(t, loose, "gina")
	d := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "Door", "activity_ids": []string{live, loose}})
	now := time.Now().UTC().Truncate(time.Second)
	upload(t, d, frank.ID, "entry", now.Add(-5*time.Minute))
	upload(t, d, gina.ID, "entry", now.Add(-5*time.Minute))
	schedule(t, inst, live, now.Add(-10*time.Minute), now.Add(50*time.Minute), 90)

	mine, err := inst.API(t, "frank", false).RegistrationAttendance(ctx, frank.ID)
	require.NoError(t, err)
	assert.Nil(t, mine.Statement, "no statement before the end")
	require.NotNil(t, mine.Seconds)
	assert.Equal(t, 55*60, *mine.Seconds, "an entry without an exit counts until ends_at")

	untimed, err := inst.API(t, "gina", false).RegistrationAttendance(ctx, gina.ID)
	require.NoError(t, err)
	assert.Nil(t, untimed.Statement)
	assert.Nil(t, untimed.Seconds, "no time inside without starts_at and ends_at")
	assert.Nil(t, untimed.Percent)
	assert.True(t, untimed.CheckedIn)
	assert.True(t, untimed.Eligible, "without a threshold, having come")
}

func TestAttendanceSeriesEstimate(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ctx := context.Background()
	admin := inst.API(t, "admin", true)
	series, err := admin.CreateSeries(ctx, client.NewSeries{Title: "grand rounds", MaxPerUser: 3})
	require.NoError(t, err)
	// Two ended activities (5 registered, 4 came; 5 registered, 3 came)
	// and one still to end, which does not count.
	shows := map[string][2]int{"A": {5, 4}, "B": {5, 3}, "C": {3, 1}}
	ids := map[string]string{}
	for _, name := range []string{"A", "B", "C"} {
		a, err := admin.CreateActivity(ctx, client.NewActivity{Title: name, Capacity: 10, SeriesID: series.ID})
		require.NoError(t, err)
		ids[name] = a.ID
	}
	d := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "Door", "activity_ids": []string{ids["A"], ids["B"], ids["C"]}})
	for name, s := range shows {
		for i := range s[0] {
			reg := inst.MustSignup(t, ids[name], name+string(rune('0'+i)))
			if i < s[1] {
				r := d.scan(t, 0, d.admin, map[string]any{"registration_id": reg.ID, "device": "d"})
				require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			}
		}
	}
	none, err := admin.SeriesAttendance(ctx, series.ID, 10, 0)
	require.NoError(t, err)
	assert.Equal(t, client.SeriesAttendance{SeriesID: series.ID}, none, "nothing ended yet: no show rate, no estimate")

	now := time.Now().UTC().Truncate(time.Second)
	schedule(t, inst, ids["A"], now.Add(-48*time.Hour), now.Add(-47*time.Hour), 0)
	schedule(t, inst, ids["B"], now.Add(-24*time.Hour), now.Add(-23*time.Hour), 0)
	schedule(t, inst, ids["C"], now.Add(time.Hour), now.Add(2*time.Hour), 0)

	plain, err := admin.SeriesAttendance(ctx, series.ID, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, 2, plain.Activities)
	assert.Equal(t, 10, plain.Registered)
	assert.Equal(t, 7, plain.CheckedIn)
	require.NotNil(t, plain.ShowRate)
	assert.InDelta(t, 0.7, *plain.ShowRate, 1e-12)
	assert.Nil(t, plain.SuggestedCapacity, "no room, no estimate")

	for _, c := range []struct {
		room int
		risk string
	}{{10, "0.05"}, {10, "0.2"}, {40, "0.01"}, {1, "0.5"}} {
		risk, _ := new(big.Rat).SetString(c.risk)
		rf, _ := risk.Float64()
		if c.risk == "0.05" {
			rf = 0 // the default
		}
		est, err := admin.SeriesAttendance(ctx, series.ID, c.room, rf)
		require.NoError(t, err)
		require.NotNil(t, est.SuggestedCapacity, "room %d", c.room)
		assert.Equal(t, exactCapacity(c.room, big.NewRat(7, 10), risk), *est.SuggestedCapacity, "room %d risk %s", c.room, c.risk)
	}

	tok := inst.Token(t, "admin", true)
	base := "/v1/series/" + series.ID + "/attendance"
	for _, q := range []string{"?room=0", "?room=1000001", "?room=ten", "?room=10&risk=0", "?room=10&risk=1",
		"?risk=-0.1", "?risk=NaN", "?risk=much", "?seats=3"} {
		assert.Equal(t, "invalid_request", inst.MustDo(t, http.MethodGet, base+q, tok, nil).ErrorCode(), q)
	}
	assert.Equal(t, "not_found", inst.MustDo(t, http.MethodGet, "/v1/series/s_01ARZ3NDEKTSV4RRFFQ69G5FAV/attendance", tok, nil).ErrorCode())
}

// exactCapacity is the largest n ≥ room with P(Binomial(n, p) > room) ≤
// risk, the tail summed in exact rationals.
func exactCapacity(room int, p, risk *big.Rat) int {
	n := room
	for exactTail(n+1, p, room).Cmp(risk) <= 0 {
		n++
	}
	return n
}

// exactTail returns P(Binomial(n, p) > k).
func exactTail(n int, p *big.Rat, k int) *big.Rat {
	q := new(big.Rat).Sub(big.NewRat(1, 1), p)
	sum := new(big.Rat)
	for j := k + 1; j <= n; j++ {
		term := new(big.Rat).SetInt(new(big.Int).Binomial(int64(n), int64(j)))
		for range j {
			term.Mul(term, p)
		}
		for range n - j {
			term.Mul(term, q)
		}
		sum.Add(sum, term)
	}
	return sum
}
