package clienttest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// setup starts an instance and returns an admin client of it and a
// function that makes clients of users.
func setup(t *testing.T) (*apptest.Instance, *client.Client, func(sub string) *client.Client) {
	t.Helper()
	inst := apptest.Start(t, apptest.Options{})
	admin := client.New(inst.URL, inst.Token(t, "admin", true), apptest.Client)
	user := func(sub string) *client.Client { return admin.WithToken(inst.Token(t, sub, false)) }
	return inst, admin, user
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// requireCode requires err to be an *Error with the status and code.
func requireCode(t *testing.T, err error, status int, code string) *client.Error {
	t.Helper()
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, status, e.Status, e.Error())
	require.Equal(t, code, e.Code, e.Error())
	require.NotEmpty(t, e.Message)
	require.True(t, client.IsCode(err, code))
	return e
}

func TestActivitiesAndSeats(t *testing.T) {
	t.Parallel()
	_, admin, user := setup(t)
	c := ctx(t)
	a, err := admin.CreateActivity(c, client.NewActivity{Title: "Cardiology grand rounds", Capacity: 2})
	require.NoError(t, err)
	require.NotEmpty(t, a.ID)
	require.Equal(t, 900, a.HoldSeconds)
	require.Equal(t, 2, a.Remaining)
	require.Equal(t, time.UTC, a.CreatedAt.Location())

	got, err := user("u").GetActivity(c, a.ID)
	require.NoError(t, err)
	require.Contains(t, []string{"cache", "database"}, got.Source, "a non-admin reads the display")
	got.Source = ""
	require.Equal(t, a, got)
	got, err = admin.GetActivity(c, a.ID)
	require.NoError(t, err)
	require.Equal(t, "database", got.Source, "an admin reads the authority")
	got.Source = ""
	require.Equal(t, a, got)

	title, capacity := "Renamed", 3
	got, err = admin.UpdateActivity(c, a.ID, client.ActivityPatch{Title: &title, Capacity: &capacity})
	require.NoError(t, err)
	require.Equal(t, "Renamed", got.Title)
	require.Equal(t, 3, got.Capacity)

	s, err := admin.WithToken("").Seats(c, a.ID)
	require.NoError(t, err)
	require.Equal(t, a.ID, s.ActivityID)
	require.Equal(t, 3, s.Remaining)
	require.Contains(t, []string{"cache", "database"}, s.Source)

	_, err = user("u").CreateActivity(c, client.NewActivity{Title: "x", Capacity: 1})
	requireCode(t, err, http.StatusForbidden, client.CodeForbidden)
	_, err = admin.WithToken("").CreateActivity(c, client.NewActivity{Title: "x", Capacity: 1})
	requireCode(t, err, http.StatusUnauthorized, client.CodeUnauthenticated)
	_, err = admin.CreateActivity(c, client.NewActivity{Title: "", Capacity: 1})
	requireCode(t, err, http.StatusBadRequest, client.CodeInvalidRequest)
	_, err = admin.GetActivity(c, "a_01JD0000000000000000000000")
	requireCode(t, err, http.StatusNotFound, client.CodeNotFound)
	_, err = admin.GetActivity(c, "../healthz")
	requireCode(t, err, http.StatusNotFound, client.CodeNotFound)
}

func TestSeatStream(t *testing.T) {
	t.Parallel()
	_, admin, user := setup(t)
	c := ctx(t)
	a, err := admin.CreateActivity(c, client.NewActivity{Title: "stream", Capacity: 5})
	require.NoError(t, err)
	st, err := admin.WithToken("").StreamSeats(c, a.ID)
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Next()
	require.NoError(t, err)
	require.Equal(t, 5, s.Remaining)
	_, err = user("u1").Signup(c, a.ID, client.SignupOptions{})
	require.NoError(t, err)
	s, err = st.Next()
	require.NoError(t, err)
	require.Equal(t, 4, s.Remaining)

	_, err = admin.StreamSeats(c, "a_01JD0000000000000000000000")
	requireCode(t, err, http.StatusNotFound, client.CodeNotFound)
}

func TestSignupAndRegistrationLifecycle(t *testing.T) {
	t.Parallel()
	_, admin, user := setup(t)
	c := ctx(t)
	a, err := admin.CreateActivity(c, client.NewActivity{Title: "lifecycle", Capacity: 2})
	require.NoError(t, err)
	alice := user("alice")

	res, err := alice.Signup(c, a.ID, client.SignupOptions{IdempotencyKey: "order-1", Metadata: map[string]string{"seat": "front"}})
	require.NoError(t, err)
	require.False(t, res.Waitlisted)
	require.False(t, res.Replayed)
	r := res.Registration
	require.Equal(t, client.Pending, r.Status)
	require.Equal(t, "alice", r.UserID)
	require.JSONEq(t, `{"seat":"front"}`, string(r.Metadata))
	require.Nil(t, r.ExpiresAt)
	require.Nil(t, r.WaitlistPosition)

	again, err := alice.Signup(c, a.ID, client.SignupOptions{IdempotencyKey: "order-1", Metadata: map[string]string{"seat": "front"}})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, r.ID, again.Registration.ID)

	_, err = alice.Signup(c, a.ID, client.SignupOptions{})
	e := requireCode(t, err, http.StatusConflict, client.CodeAlreadyRegistered)
	require.Equal(t, r.ID, e.RegistrationID)
	_, err = alice.Signup(c, a.ID, client.SignupOptions{IdempotencyKey: "order-1", Metadata: map[string]string{"seat": "back"}})
	requireCode(t, err, http.StatusConflict, client.CodeIdempotencyConflict)
	_, err = user("bob").Signup(c, a.ID, client.SignupOptions{})
	require.NoError(t, err)
	_, err = user("carol").Signup(c, a.ID, client.SignupOptions{})
	e = requireCode(t, err, http.StatusConflict, client.CodeActivityFull)
	require.Empty(t, e.RegistrationID)
	_, err = admin.WithToken("").Signup(c, a.ID, client.SignupOptions{})
	requireCode(t, err, http.StatusUnauthorized, client.CodeUnauthenticated)

	got, err := alice.GetRegistration(c, r.ID)
	require.NoError(t, err)
	require.Equal(t, r.ID, got.ID)
	_, err = user("mallory").GetRegistration(c, r.ID)
	requireCode(t, err, http.StatusNotFound, client.CodeNotFound)

	got, err = admin.SetRegistrationStatus(c, r.ID, client.AwaitingPayment)
	require.NoError(t, err)
	require.Equal(t, client.AwaitingPayment, got.Status)
	require.NotNil(t, got.ExpiresAt)
	_, err = alice.SetRegistrationStatus(c, r.ID, client.Approved)
	requireCode(t, err, http.StatusForbidden, client.CodeForbidden)
	got, err = admin.SetRegistrationStatus(c, r.ID, client.Approved)
	require.NoError(t, err)
	require.Equal(t, client.Approved, got.Status)
	_, err = admin.SetRegistrationStatus(c, r.ID, client.AwaitingPayment)
	requireCode(t, err, http.StatusConflict, client.CodeInvalidTransition)

	got, err = alice.CancelRegistration(c, r.ID)
	require.NoError(t, err)
	require.Equal(t, client.Cancelled, got.Status)
	got, err = alice.CancelRegistration(c, r.ID)
	require.NoError(t, err, "a second cancel returns it unchanged")
	require.Equal(t, client.Cancelled, got.Status)

	res, err = user("carol").Signup(c, a.ID, client.SignupOptions{})
	require.NoError(t, err, "the freed seat")
	require.Equal(t, client.Pending, res.Registration.Status)
}

func TestListRegistrationsPages(t *testing.T) {
	t.Parallel()
	_, admin, user := setup(t)
	c := ctx(t)
	a, err := admin.CreateActivity(c, client.NewActivity{Title: "pages", Capacity: 10})
	require.NoError(t, err)
	var ids []string
	for _, sub := range []string{"u1", "u2", "u3", "u4", "u5"} {
		res, err := user(sub).Signup(c, a.ID, client.SignupOptions{})
		require.NoError(t, err)
		ids = append(ids, res.Registration.ID)
	}
	_, err = admin.CancelRegistration(c, ids[1])
	require.NoError(t, err)

	var seen []string
	o := client.RegistrationListOptions{Limit: 2}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		p, err := admin.ListRegistrations(c, a.ID, o)
		require.NoError(t, err)
		for _, r := range p.Items {
			seen = append(seen, r.ID)
		}
		if p.NextCursor == nil {
			break
		}
		o.Cursor = *p.NextCursor
	}
	require.Equal(t, ids, seen, "creation order, every page")

	p, err := admin.ListRegistrations(c, a.ID, client.RegistrationListOptions{Status: client.Cancelled})
	require.NoError(t, err)
	require.Len(t, p.Items, 1)
	require.Equal(t, ids[1], p.Items[0].ID)
	require.Nil(t, p.NextCursor)

	_, err = admin.ListRegistrations(c, a.ID, client.RegistrationListOptions{Cursor: "!!"})
	requireCode(t, err, http.StatusBadRequest, client.CodeInvalidRequest)
	_, err = user("u1").ListRegistrations(c, a.ID, client.RegistrationListOptions{})
	requireCode(t, err, http.StatusForbidden, client.CodeForbidden)
}

func TestNotesAndOperations(t *testing.T) {
	t.Parallel()
	_, admin, _ := setup(t)
	c := ctx(t)
	public := admin.WithToken("")
	s, err := public.RecordView(c, "client-note")
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: "client-note", Views: 1}, s)
	s, err = public.RecordWater(c, "client-note")
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: "client-note", Views: 1, Waters: 1}, s)
	s, err = public.NoteStats(c, "client-note")
	require.NoError(t, err)
	require.Equal(t, client.NoteStats{NoteID: "client-note", Views: 1, Waters: 1}, s)
	_, err = public.NoteStats(c, "not a note")
	requireCode(t, err, http.StatusBadRequest, client.CodeInvalidRequest)

	require.NoError(t, public.Health(c))
	r, err := public.Ready(c)
	require.NoError(t, err)
	require.Equal(t, client.Readiness{Postgres: "ok", Redis: "ok"}, r)
}

func TestSeriesLimitPerUser(t *testing.T) {
	t.Parallel()
	_, admin, user := setup(t)
	c := ctx(t)
	s, err := admin.CreateSeries(c, client.NewSeries{Title: "Spring workshops", MaxPerUser: 1})
	require.NoError(t, err)
	got, err := admin.GetSeries(c, s.ID)
	require.NoError(t, err)
	require.Equal(t, s, got)
	page, err := admin.ListSeries(c, client.ListOptions{})
	require.NoError(t, err)
	require.Equal(t, []client.Series{s}, page.Items)

	a, err := admin.CreateActivity(c, client.NewActivity{Title: "One", Capacity: 5, SeriesID: s.ID})
	require.NoError(t, err)
	require.Equal(t, s.ID, *a.SeriesID)
	b, err := admin.CreateActivity(c, client.NewActivity{Title: "Two", Capacity: 5})
	require.NoError(t, err)
	require.Nil(t, b.SeriesID)
	b, err = admin.UpdateActivity(c, b.ID, client.ActivityPatch{SeriesID: &s.ID})
	require.NoError(t, err)
	require.Equal(t, s.ID, *b.SeriesID)

	alice := user("alice")
	first, err := alice.Signup(c, a.ID, client.SignupOptions{})
	require.NoError(t, err)
	_, err = alice.Signup(c, b.ID, client.SignupOptions{})
	e := requireCode(t, err, http.StatusConflict, client.CodeLimitReached)
	require.Equal(t, []string{first.Registration.ID}, e.RegistrationIDs)

	s, err = admin.UpdateSeries(c, s.ID, client.SeriesPatch{MaxPerUser: new(2)})
	require.NoError(t, err)
	require.Equal(t, 2, s.MaxPerUser)
	_, err = alice.Signup(c, b.ID, client.SignupOptions{})
	require.NoError(t, err)

	b, err = admin.UpdateActivity(c, b.ID, client.ActivityPatch{SeriesID: new("")})
	require.NoError(t, err)
	require.Nil(t, b.SeriesID, "null leaves the series")
}

func TestBlocksReserveSeatsForACode(t *testing.T) {
	t.Parallel()
	_, admin, user := setup(t)
	c := ctx(t)
	a, err := admin.CreateActivity(c, client.NewActivity{Title: "Keynote", Capacity: 3})
	require.NoError(t, err)
	require.Equal(t, 0, a.Reserved)
	until := time.Now().Add(time.Hour).Truncate(time.Second)
	b, err := admin.CreateBlock(c, a.ID, client.NewBlock{Seats: 2, Code: "SPEAKERS-27", ExpiresAt: &until})
	require.NoError(t, err)
	require.Equal(t, a.ID, b.ActivityID)
	require.Equal(t, "SPEAKERS-27", *b.Code)
	require.True(t, until.Equal(*b.ExpiresAt))
	got, err := admin.GetActivity(c, a.ID)
	require.NoError(t, err)
	require.Equal(t, []int{2, 1}, []int{got.Reserved, got.Remaining})

	public, err := user("alice").Signup(c, a.ID, client.SignupOptions{})
	require.NoError(t, err)
	require.Nil(t, public.Registration.BlockID)
	_, err = user("bob").Signup(c, a.ID, client.SignupOptions{})
	requireCode(t, err, http.StatusConflict, client.CodeActivityFull)
	speaker, err := user("carol").Signup(c, a.ID, client.SignupOptions{Code: "SPEAKERS-27"})
	require.NoError(t, err)
	require.Equal(t, b.ID, *speaker.Registration.BlockID)

	blocks, err := admin.ListBlocks(c, a.ID)
	require.NoError(t, err)
	require.Len(t, blocks, 1)
	require.Equal(t, 1, blocks[0].Used)

	require.NoError(t, admin.DeleteBlock(c, b.ID))
	requireCode(t, admin.DeleteBlock(c, b.ID), http.StatusNotFound, client.CodeNotFound)
	got, err = admin.GetActivity(c, a.ID)
	require.NoError(t, err)
	require.Equal(t, []int{2, 0, 1}, []int{got.Taken, got.Reserved, got.Remaining})

	feed, err := admin.ActivityEvents(c, a.ID, client.EventFeedOptions{})
	require.NoError(t, err)
	var types []string
	for _, e := range feed.Items {
		types = append(types, e.Type)
		if e.RegistrationID == speaker.Registration.ID || e.Type != "registration.created" {
			require.Equal(t, b.ID, *e.BlockID, e.Type)
		} else {
			require.Nil(t, e.BlockID, e.Type)
		}
	}
	require.Equal(t, []string{"block.created", "registration.created", "registration.created", "block.deleted"}, types)
}
