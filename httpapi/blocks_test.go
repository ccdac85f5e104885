package httpapi_test

import (
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/webhook"
)

// roleToken returns a token of sub whose roles are roles, signed like the
// tokens of test instances.
func roleToken(t *testing.T, sub string, roles ...string) string {
	t.Helper()
	return signJWT(t, jwt.SigningMethodHS256, []byte(apptest.Secret),
		jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix(), "roles": roles})
}

// requireSeats checks an activity's reserved and remaining as an admin
// reads them (the authority), and the remaining of its seat display on
// every instance.
func requireSeats(t *testing.T, insts []*apptest.Instance, activityID string, taken, reserved, remaining int) {
	t.Helper()
	a, err := insts[0].API(t, "admin", true).GetActivity(t.Context(), activityID)
	require.NoError(t, err)
	require.Equal(t, []int{taken, reserved, remaining}, []int{a.Taken, a.Reserved, a.Remaining}, "taken, reserved, remaining")
	for _, inst := range insts {
		s, err := inst.Public().Seats(t.Context(), activityID)
		require.NoError(t, err)
		require.Equal(t, remaining, s.Remaining, "the seat display (%s)", s.Source)
	}
}

// blockEvents returns the block events of an activity's feed.
func blockEvents(t *testing.T, inst *apptest.Instance, activityID string) []client.Event {
	t.Helper()
	feed, err := inst.API(t, "admin", true).ActivityEvents(t.Context(), activityID, client.EventFeedOptions{})
	require.NoError(t, err)
	var out []client.Event
	for _, e := range feed.Items {
		if strings.HasPrefix(e.Type, "block.") {
			out = append(out, e)
		}
	}
	return out
}

// TestCodeBlockHoldsItsSeatsThroughABurst: capacity 10 with a code block
// of 4. A public burst over two instances gets exactly 6; a speaker with
// the code still gets a seat from the block; deleting the block returns
// its 3 unused seats to the public, and exactly 3 more are admitted. The
// speaker's registration stays.
func TestCodeBlockHoldsItsSeatsThroughABurst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	insts := []*apptest.Instance{a, b}
	admin := a.API(t, "admin", true)
	id := a.CreateActivity(t, "keynote", 10)

	r := a.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/blocks", a.Token(t, "admin", true), `{"seats":4,"code":"SPEAKERS-27"}`)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), `"expires_at":null`)
	require.NotContains(t, string(r.Body), `"role"`, "a code block has no role")
	var blk client.Block
	r.JSON(t, &blk)
	require.Regexp(t, `^b_[0-9A-Z]{26}$`, blk.ID)
	require.Equal(t, client.Block{ID: blk.ID, ActivityID: id, Seats: 4, Code: new("SPEAKERS-27"), CreatedAt: blk.CreatedAt}, blk)
	requireSeats(t, insts, id, 0, 4, 6)

	counts := apptest.SignupBurst(t, insts, id, "public", 30)
	require.Equal(t, map[int]int{http.StatusCreated: 6, http.StatusConflict: 24}, counts)
	requireSeats(t, insts, id, 6, 4, 0)

	// A wrong code is refused, not taken for a public signup.
	_, err := b.Signup(t, id, "mallory", client.SignupOptions{Code: "SPEAKERS-28"})
	e := apptest.Refusal(t, err)
	require.Equal(t, http.StatusBadRequest, e.Status)
	require.Equal(t, client.CodeInvalidRequest, e.Code)

	speaker := b.MustSignup(t, id, "speaker", client.SignupOptions{Code: "SPEAKERS-27"})
	require.NotNil(t, speaker.BlockID, "the speaker's seat comes from the block")
	require.Equal(t, blk.ID, *speaker.BlockID)
	requireSeats(t, insts, id, 7, 3, 0)
	require.Equal(t, 7, a.DisplayTaken(t, id), "a block seat counts once in the display tier")
	blocks, err := admin.ListBlocks(ctx, id)
	require.NoError(t, err)
	require.Len(t, blocks, 1)
	require.Equal(t, 1, blocks[0].Used)

	require.NoError(t, b.API(t, "admin", true).DeleteBlock(ctx, blk.ID))
	requireSeats(t, insts, id, 7, 0, 3)
	blocks, err = admin.ListBlocks(ctx, id)
	require.NoError(t, err)
	require.Empty(t, blocks)

	counts = apptest.SignupBurst(t, insts, id, "late", 30)
	require.Equal(t, map[int]int{http.StatusCreated: 3, http.StatusConflict: 27}, counts)
	require.Equal(t, 10, a.AuthorityTaken(t, id))
	requireSeats(t, insts, id, 10, 0, 0)

	got, err := admin.GetRegistration(ctx, speaker.ID)
	require.NoError(t, err)
	require.Equal(t, client.Pending, got.Status, "the speaker's registration stays")
	require.Equal(t, blk.ID, *got.BlockID)

	// The code is gone with its block.
	_, err = a.Signup(t, id, "late-speaker", client.SignupOptions{Code: "SPEAKERS-27"})
	require.Equal(t, client.CodeInvalidRequest, apptest.Refusal(t, err).Code)

	// The export names the block of the speaker's row only.
	rc, err := admin.ExportRegistrations(ctx, id, "")
	require.NoError(t, err)
	body, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	recs, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 1+10)
	for _, rec := range recs[1:] {
		want := ""
		if rec[0] == speaker.ID {
			want = blk.ID
		}
		require.Equal(t, want, rec[8], "block_id of %s", rec[1])
	}
}

// TestRoleBlockOnAWaitlistedActivity: capacity 3 with a role block of 2.
// The public waits after one seat; a resident gets a block seat; deleting
// the block promotes the first in line at once. The feed records the
// block's creation and deletion with the admin as actor, and the
// resident's registration events carry the block.
func TestRoleBlockOnAWaitlistedActivity(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	insts := []*apptest.Instance{a, b}
	id := a.CreateWaitlisted(t, "rounds", 3)
	blk, err := a.API(t, "chief", true).CreateBlock(ctx, id, client.NewBlock{Seats: 2, Role: "resident"})
	require.NoError(t, err)
	require.Equal(t, "resident", *blk.Role)
	require.Nil(t, blk.Code)

	first := a.MustSignup(t, id, "u0")
	require.Nil(t, first.BlockID)
	res, err := b.Signup(t, id, "u1")
	require.NoError(t, err)
	require.True(t, res.Waitlisted, "the public waits after one seat")
	next := res.Registration
	res, err = a.Signup(t, id, "u2")
	require.NoError(t, err)
	require.True(t, res.Waitlisted)
	last := res.Registration

	resident, err := client.New(b.URL, roleToken(t, "dr-who", "resident"), apptest.Client).Signup(ctx, id, client.SignupOptions{})
	require.NoError(t, err)
	require.False(t, resident.Waitlisted, "a resident takes a block seat past the waiting list")
	require.Equal(t, blk.ID, *resident.Registration.BlockID)
	requireSeats(t, insts, id, 2, 1, 0)

	// Someone else's role is the public's.
	other, err := client.New(a.URL, roleToken(t, "nurse", "nurse"), apptest.Client).Signup(ctx, id, client.SignupOptions{})
	require.NoError(t, err)
	require.True(t, other.Waitlisted)
	require.Nil(t, other.Registration.BlockID)

	require.NoError(t, b.API(t, "chief", true).DeleteBlock(ctx, blk.ID))
	admin := a.API(t, "admin", true)
	got, err := admin.GetRegistration(ctx, next.ID)
	require.NoError(t, err)
	require.Equal(t, client.Pending, got.Status, "the first in line is promoted by the deletion itself")
	got, err = admin.GetRegistration(ctx, last.ID)
	require.NoError(t, err)
	require.Equal(t, client.Waitlisted, got.Status)
	require.Equal(t, 1, *got.WaitlistPosition)
	got, err = admin.GetRegistration(ctx, resident.Registration.ID)
	require.NoError(t, err)
	require.Equal(t, client.Pending, got.Status)
	requireSeats(t, insts, id, 3, 0, 0)

	// A second deletion: the block is gone.
	err = admin.DeleteBlock(ctx, blk.ID)
	require.Equal(t, http.StatusNotFound, apptest.Refusal(t, err).Status)

	evs := blockEvents(t, a, id)
	require.Len(t, evs, 2)
	require.Equal(t, []string{"block.created", "block.deleted"}, []string{evs[0].Type, evs[1].Type})
	require.Equal(t, []int{2, 1}, []int{evs[0].Seats, evs[1].Seats}, "the seats held, then the unused seats returned")
	for _, e := range evs {
		require.Equal(t, "admin:chief", e.Actor)
		require.Equal(t, blk.ID, *e.BlockID)
		require.Equal(t, id, e.ActivityID)
	}
	regEvents, err := admin.RegistrationEvents(ctx, resident.Registration.ID)
	require.NoError(t, err)
	require.NotEmpty(t, regEvents)
	for _, e := range regEvents {
		require.NotNil(t, e.BlockID, "%s of a block registration", e.Type)
		require.Equal(t, blk.ID, *e.BlockID)
	}
	regEvents, err = admin.RegistrationEvents(ctx, next.ID)
	require.NoError(t, err)
	require.Equal(t, "registration.promoted", regEvents[len(regEvents)-1].Type)
	for _, e := range regEvents {
		require.Nil(t, e.BlockID, "%s of a public registration", e.Type)
	}
}

// TestBlockExpiryReturnsItsSeatsOnItsOwn: a block whose expires_at passes
// returns its seats without any request, promoting the waiting list; the
// feed shows block.expired by the system. The instances' clock of expiry
// is moved past expires_at once everything is in place, so that no step
// of the test races the expiry.
func TestBlockExpiryReturnsItsSeatsOnItsOwn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var skew atomic.Int64
	opts := app.Options{ExpiryInterval: 100 * time.Millisecond,
		Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }}
	a := apptest.Start(t, apptest.Options{App: opts})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL, App: opts})
	insts := []*apptest.Instance{a, b}
	id := a.CreateWaitlisted(t, "expiring", 3)
	admin := a.API(t, "admin", true)
	until := time.Now().Add(time.Hour)
	blk, err := admin.CreateBlock(ctx, id, client.NewBlock{Seats: 2, Code: "EARLY", ExpiresAt: &until})
	require.NoError(t, err)
	require.WithinDuration(t, until, *blk.ExpiresAt, time.Millisecond)
	require.Equal(t, time.UTC, blk.ExpiresAt.Location())

	a.MustSignup(t, id, "u0")
	var waiting []string
	for _, u := range []string{"u1", "u2", "u3"} {
		res, err := b.Signup(t, id, u)
		require.NoError(t, err)
		require.True(t, res.Waitlisted)
		waiting = append(waiting, res.Registration.ID)
	}
	requireSeats(t, insts, id, 1, 2, 0)

	skew.Store(int64(2 * time.Hour))
	require.Eventually(t, func() bool {
		got, err := admin.GetRegistration(ctx, waiting[1])
		return err == nil && got.Status == client.Pending
	}, 20*time.Second, 50*time.Millisecond, "the expiry promotes the first two in line")
	for i, want := range []client.Status{client.Pending, client.Pending, client.Waitlisted} {
		got, err := admin.GetRegistration(ctx, waiting[i])
		require.NoError(t, err)
		require.Equal(t, want, got.Status, "in line %d", i)
	}
	requireSeats(t, insts, id, 3, 0, 0)
	blocks, err := admin.ListBlocks(ctx, id)
	require.NoError(t, err)
	require.Empty(t, blocks)

	evs := blockEvents(t, a, id)
	require.Len(t, evs, 2)
	require.Equal(t, "block.expired", evs[1].Type)
	require.Equal(t, "system", evs[1].Actor)
	require.Equal(t, 2, evs[1].Seats)
	require.Equal(t, blk.ID, *evs[1].BlockID)

	_, err = a.Signup(t, id, "late", client.SignupOptions{Code: "EARLY"})
	require.Equal(t, client.CodeInvalidRequest, apptest.Refusal(t, err).Code, "an expired code is refused")
}

// TestBlockOverTheFreeSeatsIsRefused: a block larger than the activity's
// free seats, or a free count of one of its pools, is activity_full.
func TestBlockOverTheFreeSeatsIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.API(t, "admin", true)
	id := inst.CreateActivity(t, "small", 5)
	inst.MustSignup(t, id, "u0")
	_, err := admin.CreateBlock(ctx, id, client.NewBlock{Seats: 5, Code: "BIG"})
	e := apptest.Refusal(t, err)
	require.Equal(t, http.StatusConflict, e.Status)
	require.Equal(t, client.CodeActivityFull, e.Code)
	require.Equal(t, 4, *e.Remaining)
	_, err = admin.CreateBlock(ctx, id, client.NewBlock{Seats: 4, Code: "FITS"})
	require.NoError(t, err)

	pool := createPool(t, inst, "hall", 3)
	pooled, err := admin.CreateActivity(ctx, client.NewActivity{Title: "pooled", Capacity: 10, Pools: []string{pool.ID}})
	require.NoError(t, err)
	_, err = admin.CreateBlock(ctx, pooled.ID, client.NewBlock{Seats: 4, Role: "resident"})
	require.Equal(t, client.CodeActivityFull, apptest.Refusal(t, err).Code, "the pool has 3 seats")
	blk, err := admin.CreateBlock(ctx, pooled.ID, client.NewBlock{Seats: 3, Role: "resident"})
	require.NoError(t, err)
	// The pool shows the seats its activities' blocks hold, to an admin
	// (the authority) and to the public (the display tier).
	pools := func(want [3]int, why string) {
		t.Helper()
		for _, api := range []*client.Client{admin, inst.Public()} {
			p, err := api.GetPool(ctx, pool.ID)
			require.NoError(t, err)
			require.Equal(t, want, [3]int{p.Taken, p.Reserved, p.Remaining}, "%s (taken, reserved, remaining; %s)", why, p.Source)
		}
	}
	pools([3]int{0, 3, 0}, "the pool holds the block's seats too")
	res, err := client.New(inst.URL, roleToken(t, "r1", "resident"), apptest.Client).Signup(ctx, pooled.ID, client.SignupOptions{})
	require.NoError(t, err)
	require.Equal(t, blk.ID, *res.Registration.BlockID)
	pools([3]int{1, 2, 0}, "a resident's seat comes from the block")
	require.NoError(t, admin.DeleteBlock(ctx, blk.ID))
	pools([3]int{1, 0, 2}, "deleting the block returns its unused seats to the pool")
}

func TestBlockBadInputGetsTheErrorShape(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.Token(t, "admin", true)
	activity := inst.CreateActivity(t, "shape", 10)
	blk, err := inst.API(t, "admin", true).CreateBlock(t.Context(), activity, client.NewBlock{Seats: 1, Code: "OK"})
	require.NoError(t, err)
	const missingActivity = "a_01JD0000000000000000000000"
	const missingBlock = "b_01JD0000000000000000000000"
	path := "/v1/activities/" + activity + "/blocks"
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"seats 0", "POST", path, `{"seats":0,"code":"X"}`, 400, "invalid_request"},
		{"negative seats", "POST", path, `{"seats":-1,"code":"X"}`, 400, "invalid_request"},
		{"seats missing", "POST", path, `{"code":"X"}`, 400, "invalid_request"},
		{"seats a string", "POST", path, `{"seats":"2","code":"X"}`, 400, "invalid_request"},
		{"seats a fraction", "POST", path, `{"seats":1.5,"code":"X"}`, 400, "invalid_request"},
		{"both code and role", "POST", path, `{"seats":1,"code":"X","role":"resident"}`, 400, "invalid_request"},
		{"neither code nor role", "POST", path, `{"seats":1}`, 400, "invalid_request"},
		{"empty code", "POST", path, `{"seats":1,"code":""}`, 400, "invalid_request"},
		{"code with a space", "POST", path, `{"seats":1,"code":"A B"}`, 400, "invalid_request"},
		{"long role", "POST", path, `{"seats":1,"role":"` + strings.Repeat("r", 65) + `"}`, 400, "invalid_request"},
		{"expires_at in the past", "POST", path, `{"seats":1,"code":"X","expires_at":"` + past + `"}`, 400, "invalid_request"},
		{"expires_at not a time", "POST", path, `{"seats":1,"code":"X","expires_at":"tomorrow"}`, 400, "invalid_request"},
		{"expires_at a number", "POST", path, `{"seats":1,"code":"X","expires_at":1893456000}`, 400, "invalid_request"},
		{"unknown field", "POST", path, `{"seats":1,"code":"X","used":0}`, 400, "invalid_request"},
		{"field in another case", "POST", path, `{"Seats":1,"code":"X"}`, 400, "invalid_request"},
		{"key twice", "POST", path, `{"seats":1,"code":"X","code":"Y"}`, 400, "invalid_request"},
		{"empty body", "POST", path, ``, 400, "invalid_request"},
		{"not an object", "POST", path, `[]`, 400, "invalid_request"},
		{"query on a listing", "GET", path + "?limit=1", ``, 400, "invalid_request"},
		{"unknown activity", "POST", "/v1/activities/" + missingActivity + "/blocks", `{"seats":1,"code":"X"}`, 404, "not_found"},
		{"list of an unknown activity", "GET", "/v1/activities/" + missingActivity + "/blocks", ``, 404, "not_found"},
		{"malformed activity id", "POST", "/v1/activities/42/blocks", `{"seats":1,"code":"X"}`, 404, "not_found"},
		{"delete an unknown block", "DELETE", "/v1/blocks/" + missingBlock, ``, 404, "not_found"},
		{"delete a malformed block id", "DELETE", "/v1/blocks/zzz", ``, 404, "not_found"},
		{"delete an activity as a block", "DELETE", "/v1/blocks/" + activity, ``, 404, "not_found"},
		{"read a block", "GET", "/v1/blocks/" + blk.ID, ``, 405, "method_not_allowed"},
		{"signup with an empty code", "POST", "/v1/activities/" + activity + "/registrations", `{"code":""}`, 400, "invalid_request"},
		{"signup with a code a number", "POST", "/v1/activities/" + activity + "/registrations", `{"code":7}`, 400, "invalid_request"},
		{"signup with an unknown code", "POST", "/v1/activities/" + activity + "/registrations", `{"code":"NOPE"}`, 400, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireErrorShape(t, inst.MustDo(t, tc.method, tc.path, admin, tc.body), tc.status, tc.code)
		})
	}
	blocks, err := inst.API(t, "admin", true).ListBlocks(t.Context(), activity)
	require.NoError(t, err)
	require.Equal(t, []client.Block{blk}, blocks, "the refused requests changed nothing")
	a, err := inst.API(t, "admin", true).GetActivity(t.Context(), activity)
	require.NoError(t, err)
	require.Equal(t, 0, a.Taken, "no refused signup took a seat")
}

func TestBlockRoutesNeedAnAdmin(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	activity := inst.CreateActivity(t, "guarded", 10)
	blk, err := inst.API(t, "admin", true).CreateBlock(t.Context(), activity, client.NewBlock{Seats: 2, Code: "SECRET"})
	require.NoError(t, err)
	user := inst.Token(t, "u", false)
	resident := roleToken(t, "r", "resident")
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/activities/" + activity + "/blocks", `{"seats":1,"code":"X"}`},
		{"GET", "/v1/activities/" + activity + "/blocks", ``},
		{"DELETE", "/v1/blocks/" + blk.ID, ``},
	}
	for _, rt := range routes {
		requireErrorShape(t, inst.MustDo(t, rt.method, rt.path, "", rt.body), http.StatusUnauthorized, "unauthenticated")
		requireErrorShape(t, inst.MustDo(t, rt.method, rt.path, user, rt.body), http.StatusForbidden, "forbidden")
		requireErrorShape(t, inst.MustDo(t, rt.method, rt.path, resident, rt.body), http.StatusForbidden, "forbidden")
	}
	blocks, err := inst.API(t, "admin", true).ListBlocks(t.Context(), activity)
	require.NoError(t, err)
	require.Equal(t, []client.Block{blk}, blocks, "the refused requests changed nothing")
	// The code is never shown to the public.
	r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+activity, "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.NotContains(t, string(r.Body), "SECRET")
	require.Contains(t, string(r.Body), `"reserved":2`)
}

// TestBlockCodesCannotBeGuessed: every signup with a code costs the user
// one attempt of a small bucket that all instances share; past it the
// user gets 429 with Retry-After, whatever the code and whichever
// instance they ask, while another user still has theirs. While Redis is
// down, each instance counts the attempts it serves on its own.
func TestBlockCodesCannotBeGuessed(t *testing.T) {
	t.Parallel()
	redisSrv := testenv.PrivateRedis(t)
	opts := apptest.Options{RedisURL: "redis://" + redisSrv.Addr,
		App: app.Options{HTTP: httpapi.Config{CodeLimit: httpapi.RateLimit{PerSecond: 0.001, Burst: 3}}}}
	a := apptest.Start(t, opts)
	opts.DatabaseURL = a.DatabaseURL
	b := apptest.Start(t, opts)
	insts := []*apptest.Instance{a, b}
	id := a.CreateActivity(t, "guarded", 10)
	r := a.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/blocks", a.Token(t, "admin", true), `{"seats":2,"code":"RIGHT-ONE"}`)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	for i := range 3 {
		_, err := insts[i%2].Signup(t, id, "guesser", client.SignupOptions{Code: fmt.Sprintf("GUESS-%d", i)})
		require.Equal(t, client.CodeInvalidRequest, apptest.Refusal(t, err).Code)
	}
	for _, inst := range insts {
		_, err := inst.Signup(t, id, "guesser", client.SignupOptions{Code: "RIGHT-ONE"})
		e := apptest.Refusal(t, err)
		require.Equal(t, client.CodeRateLimited, e.Code, "out of attempts on every instance: even the right code waits")
	}
	reg := b.MustSignup(t, id, "speaker", client.SignupOptions{Code: "RIGHT-ONE"})
	require.NotNil(t, reg.BlockID)
	plain := a.MustSignup(t, id, "guesser", client.SignupOptions{})
	require.Nil(t, plain.BlockID, "a signup without a code is not limited by the code attempts")

	redisSrv.Kill()
	for i := range 3 {
		_, err := a.Signup(t, id, "prober", client.SignupOptions{Code: fmt.Sprintf("PROBE-%d", i)})
		require.Equal(t, client.CodeInvalidRequest, apptest.Refusal(t, err).Code)
	}
	_, err := a.Signup(t, id, "prober", client.SignupOptions{Code: "PROBE-3"})
	require.Equal(t, client.CodeRateLimited, apptest.Refusal(t, err).Code, "without Redis the instance counts on its own")
}

// TestBlockCodesNeverLeak: a block's code is shown to admins who read the
// block, and nowhere else. Signups with a wrong and with the right code
// (one with an Idempotency-Key, replayed) leave no trace of either code
// in the logs (at debug level), in the answers, the feeds or the webhook
// payloads of their events, nor in any row of the database but the
// block's own.
func TestBlockCodesNeverLeak(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const right, wrong = "SPK-4f9c-RIGHT", "SPK-4f9c-WRONG"
	var mu sync.Mutex
	var payloads [][]byte
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		payloads = append(payloads, body)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	logs := &apptest.SyncBuffer{}
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		Logger:       slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		WebhookGuard: webhook.Guard{AllowPrivate: true},
	}})
	admin := inst.API(t, "admin", true)
	id := inst.CreateActivity(t, "guarded", 10)
	_, err := admin.CreateWebhook(ctx, client.NewWebhook{URL: hook.URL, Events: []string{"*"}, ActivityID: &id})
	require.NoError(t, err)
	blk, err := admin.CreateBlock(ctx, id, client.NewBlock{Seats: 2, Code: right})
	require.NoError(t, err)

	var answers []string
	user := inst.Token(t, "speaker", false)
	signup := func(code string, headers ...string) apptest.Response {
		r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", user,
			`{"code":"`+code+`","metadata":{"name":"Ada"}}`, headers...)
		answers = append(answers, string(r.Body))
		return r
	}
	r := signup(wrong)
	requireErrorShape(t, r, http.StatusBadRequest, "invalid_request")
	r = signup(wrong, "Idempotency-Key", "k-wrong")
	requireErrorShape(t, r, http.StatusBadRequest, "invalid_request")
	r = signup(right, "Idempotency-Key", "k-right")
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	var reg client.Registration
	r.JSON(t, &reg)
	require.Equal(t, blk.ID, *reg.BlockID)
	r = signup(right, "Idempotency-Key", "k-right")
	require.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
	requireErrorShape(t, signup(right), http.StatusConflict, "already_registered")
	for _, path := range []string{"/v1/registrations/" + reg.ID, "/v1/registrations/" + reg.ID + "/events", "/v1/me/registrations"} {
		r := inst.MustDo(t, http.MethodGet, path, user, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
		answers = append(answers, string(r.Body))
	}
	for _, path := range []string{"/v1/activities/" + id, "/v1/activities/" + id + "/seats"} {
		r := inst.MustDo(t, http.MethodGet, path, "", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
		answers = append(answers, string(r.Body))
	}
	feed := inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/events", inst.Token(t, "admin", true), nil)
	require.Equal(t, http.StatusOK, feed.Status, string(feed.Body))
	require.Contains(t, string(feed.Body), blk.ID, "the feed names the block")
	answers = append(answers, string(feed.Body))
	require.NoError(t, admin.DeleteBlock(ctx, blk.ID))

	// Block events go to no webhook: the payload is the block
	// registration's registration.created.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(payloads) == 1
	}, 20*time.Second, 50*time.Millisecond, "the webhook receives the event")
	mu.Lock()
	payload := string(payloads[0])
	mu.Unlock()
	require.Contains(t, payload, blk.ID, "the payload names the block")
	answers = append(answers, payload)

	// Every table but block, each row as text (bytea as hex).
	rows, err := inst.App.Pool.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname <> 'block'`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "idempotency_key")
	var stored []string
	for _, table := range tables {
		rows, err := inst.App.Pool.Query(ctx, `SELECT t::text FROM `+pgx.Identifier{table}.Sanitize()+` t`)
		require.NoError(t, err)
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		stored = append(stored, texts...)
	}
	require.NotEmpty(t, logs.String(), "the instance logged its requests")
	for _, code := range []string{right, wrong} {
		for _, s := range answers {
			require.NotContains(t, s, code)
		}
		for _, line := range strings.Split(logs.String(), "\n") {
			require.False(t, strings.Contains(line, code), "a log line has the code %s: %s", code, line)
		}
		for _, s := range stored {
			require.NotContains(t, s, code)
			require.NotContains(t, s, hex.EncodeToString([]byte(code)))
		}
	}
}

// TestSeatStreamShowsABlockAtOnce: a block's creation and deletion move
// the remaining seats of the seat stream (which the seats widget shows)
// within a second, on an instance other than the one that served them.
func TestSeatStreamShowsABlockAtOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	id := a.CreateActivity(t, "streamed", 10)
	a.MustSignup(t, id, "u0")
	c := openStream(t, a.URL, id)
	require.Equal(t, 9, c.Next(t, time.Second).seats(t).Remaining)

	nextRemaining := func(remaining int) registration.Seats {
		t.Helper()
		deadline := time.Now().Add(time.Second)
		for {
			if s := c.Next(t, time.Until(deadline)).seats(t); s.Remaining == remaining {
				return s
			}
		}
	}
	blk, err := b.API(t, "admin", true).CreateBlock(ctx, id, client.NewBlock{Seats: 4, Code: "STREAMED"})
	require.NoError(t, err)
	require.Equal(t, 1, nextRemaining(5).Taken, "the block's seats are reserved, not taken")
	require.NoError(t, b.API(t, "admin", true).DeleteBlock(ctx, blk.ID))
	require.Equal(t, 1, nextRemaining(9).Taken)
}
