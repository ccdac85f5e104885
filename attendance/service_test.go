package attendance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/attendance"
	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
)

// fakeStore holds one activity's rows in creation order.
type fakeStore struct {
	act    attendance.Activity
	rows   []attendance.Row
	series attendance.SeriesCounts
	reads  []attendance.SheetQuery
}

func (f *fakeStore) AttendanceSheet(_ context.Context, q attendance.SheetQuery) (attendance.SheetRows, error) {
	f.reads = append(f.reads, q)
	out := attendance.SheetRows{Activity: f.act}
	after := q.AfterSeq
	for _, r := range f.rows {
		if q.After != "" && r.RegistrationID == q.After {
			after = r.Seq
		}
		if q.Counts {
			out.Counts.Registered++
			if attendance.FirstEntry(r.Checks) != nil {
				out.Counts.CheckedIn++
			}
		}
	}
	for _, r := range f.rows {
		if r.Seq > after && len(out.Rows) < q.Limit {
			out.Rows = append(out.Rows, r)
		}
	}
	return out, nil
}

func (f *fakeStore) RegistrationAttendance(_ context.Context, id string) (attendance.Activity, attendance.Row, error) {
	for _, r := range f.rows {
		if r.RegistrationID == id {
			return f.act, r, nil
		}
	}
	return f.act, attendance.Row{}, registration.RegistrationNotFound(id)
}

func (f *fakeStore) SeriesAttendance(context.Context, string, time.Time) (attendance.SeriesCounts, error) {
	return f.series, nil
}

type ownerOnly struct{}

func (ownerOnly) GetRegistration(_ context.Context, id string, c registration.Caller) (registration.Registration, error) {
	if c.UserID != "u1" && !c.Admin {
		return registration.Registration{}, registration.RegistrationNotFound(id)
	}
	return registration.Registration{ID: id, UserID: "u1"}, nil
}

// newFake returns a service on n rows (every other one checked in) of
// the hour activity, at the clock now.
func newFake(t *testing.T, n int, now time.Time) (*attendance.Service, *fakeStore, *checkin.Keyring) {
	key, err := checkin.NewKey(start)
	require.NoError(t, err)
	ring := checkin.NewKeyring([]checkin.Key{key})
	f := &fakeStore{act: hour(ptr(80))}
	for i := 1; i <= n; i++ {
		r := attendance.Row{Seq: int64(i), RegistrationID: fmt.Sprintf("r_%d", i), UserID: fmt.Sprintf("u%d", i), Seats: 1, Status: registration.Approved}
		if i%2 == 1 {
			r.Checks = []attendance.Check{in(1, 0), out(1, 50)}
		}
		f.rows = append(f.rows, r)
	}
	s := attendance.NewService(attendance.Config{Store: f, Registrations: ownerOnly{}, Keys: keyringSigner{ring}, Now: func() time.Time { return now }})
	return s, f, ring
}

func TestAttendanceServicePages(t *testing.T) {
	s, _, _ := newFake(t, 5, at(90))
	ctx := context.Background()
	first, err := s.Activity(ctx, "a_1", "", 2)
	require.NoError(t, err)
	assert.Equal(t, attendance.Summary{Registered: 5, CheckedIn: 3, NoShow: 2, NoShowRate: 0.4}, first.Summary)
	require.Len(t, first.Items, 2)
	require.NotNil(t, first.NextCursor)
	assert.Equal(t, registration.EncodeCursor("r_2"), *first.NextCursor, "the cursor names the page's last item")
	last, err := s.Activity(ctx, "a_1", "r_4", 2)
	require.NoError(t, err)
	assert.Len(t, last.Items, 1)
	assert.Nil(t, last.NextCursor, "no page after the last")
	all, err := s.Activity(ctx, "a_1", "", 0)
	require.NoError(t, err)
	assert.Len(t, all.Items, 5, "the default limit")
	for _, bad := range []int{-1, 501} {
		_, err := s.Activity(ctx, "a_1", "", bad)
		assert.Equal(t, capacityd.EInvalid, capacityd.ErrorCode(err))
	}
}

func TestAttendanceServiceExportsInChunks(t *testing.T) {
	s, f, _ := newFake(t, 2500, at(90))
	var got []string
	require.NoError(t, s.Export(context.Background(), "a_1", func(it attendance.Item) error {
		got = append(got, it.RegistrationID)
		return nil
	}))
	require.Len(t, got, 2500)
	assert.Equal(t, "r_2500", got[2499])
	require.Len(t, f.reads, 3)
	assert.Equal(t, []int64{0, 1000, 2000}, []int64{f.reads[0].AfterSeq, f.reads[1].AfterSeq, f.reads[2].AfterSeq})
	assert.False(t, f.reads[0].Counts, "an export reads no counts")
}

func TestAttendanceServiceStatement(t *testing.T) {
	ctx := context.Background()
	before, _, _ := newFake(t, 1, at(59))
	p, err := before.Registration(ctx, "r_1", registration.Caller{UserID: "u1"})
	require.NoError(t, err)
	assert.Nil(t, p.Statement, "no statement before the end")
	require.NotNil(t, p.Seconds)
	assert.Equal(t, int64(3000), *p.Seconds)

	after, _, ring := newFake(t, 1, at(60))
	p, err = after.Registration(ctx, "r_1", registration.Caller{UserID: "u1"})
	require.NoError(t, err)
	require.NotNil(t, p.Statement, "a statement from the end on")
	set, err := json.Marshal(ring.JWKS())
	require.NoError(t, err)
	kf, err := keyfunc.NewJWKSetJSON(set)
	require.NoError(t, err)
	var claims attendance.StatementClaims
	parsed, err := jwt.ParseWithClaims(*p.Statement, &claims, kf.Keyfunc, jwt.WithValidMethods([]string{"EdDSA"}))
	require.NoError(t, err, "it verifies with the published keys")
	assert.Equal(t, checkin.StatementType, parsed.Header["typ"])
	assert.Equal(t, attendance.StatementClaims{Reg: "r_1", Act: "a_1", Sub: "u1", StartsAt: "2025-03-04T09:00:00Z",
		EndsAt: "2025-03-04T10:00:00Z", Seconds: 3000, Percent: 83.3, Eligible: true, Iat: at(60).Unix()}, claims)
	_, err = ring.VerifyTicket(*p.Statement)
	assert.Equal(t, capacityd.EInvalidTicket, capacityd.ErrorCode(err), "never a ticket")

	_, err = after.Registration(ctx, "r_1", registration.Caller{UserID: "u2"})
	assert.Equal(t, capacityd.ENotFound, capacityd.ErrorCode(err), "another user's")
}

func TestAttendanceServiceSeries(t *testing.T) {
	s, f, _ := newFake(t, 0, at(90))
	ctx := context.Background()
	rep, err := s.Series(ctx, "s_1", 10, attendance.DefaultRisk)
	require.NoError(t, err)
	assert.Equal(t, attendance.SeriesReport{SeriesID: "s_1"}, rep, "nobody registered: no rate, no estimate")

	f.series = attendance.SeriesCounts{Activities: 2, Counts: attendance.Counts{Registered: 10, CheckedIn: 7}}
	rep, err = s.Series(ctx, "s_1", 0, attendance.DefaultRisk)
	require.NoError(t, err)
	require.NotNil(t, rep.ShowRate)
	assert.InDelta(t, 0.7, *rep.ShowRate, 1e-12)
	assert.Nil(t, rep.SuggestedCapacity, "no room")
	rep, err = s.Series(ctx, "s_1", 10, attendance.DefaultRisk)
	require.NoError(t, err)
	require.NotNil(t, rep.SuggestedCapacity)
	assert.Equal(t, attendance.SuggestedCapacity(10, 0.7, 0.05), *rep.SuggestedCapacity)

	for _, bad := range []struct {
		room int
		risk float64
	}{{-1, 0.05}, {1_000_001, 0.05}, {10, 0}, {10, 1}, {10, -0.5}} {
		_, err := s.Series(ctx, "s_1", bad.room, bad.risk)
		assert.Equal(t, capacityd.EInvalid, capacityd.ErrorCode(err), "%+v", bad)
	}
}

// keyringSigner signs with a keyring, as the check-in service does once
// its keys are read.
type keyringSigner struct{ ring *checkin.Keyring }

func (k keyringSigner) SignAs(_ context.Context, claims jwt.Claims, typ string) (string, error) {
	return k.ring.SignAs(claims, typ)
}
