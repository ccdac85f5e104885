package e2e

import (
	"context"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
)

// TestGroupBurstWithRedisFlushedIsExact: 300 parties of 1–4 seats at once
// on 60 seats, over two instances, with their Redis flushed every 15 ms.
// The seats answered 201 are the authority's taken, at most 60, and every
// refused party asked for more than the seats that were left at the end
// (nothing was released, so the free seats only shrank).
func TestGroupBurstWithRedisFlushedIsExact(t *testing.T) {
	t.Parallel()
	rs := testenv.PrivateRedis(t)
	a := apptest.Start(t, apptest.Options{RedisURL: rs.URL()})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL, RedisURL: rs.URL()})
	admin := testenv.RedisClient(t, rs.URL())
	act, err := a.API(t, "admin", true).CreateActivity(t.Context(), client.NewActivity{
		Title: "parties", Capacity: 60, MaxSeatsPerRegistration: 4})
	require.NoError(t, err)

	ctx, stop := context.WithCancel(t.Context())
	flushed := make(chan int)
	go func() {
		n := 0
		tick := time.NewTicker(15 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				flushed <- n
				return
			case <-tick.C:
				if admin.FlushAll(ctx).Err() == nil {
					n++
				}
			}
		}
	}()

	insts := []*apptest.Instance{a, b}
	var mu sync.Mutex
	var admitted int
	var refused []int
	var wg sync.WaitGroup
	for i := range 300 {
		seats := 1 + rand.IntN(4)
		wg.Go(func() {
			res, err := insts[i%2].Signup(t, act.ID, fmt.Sprint("p", i), client.SignupOptions{Seats: seats})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				require.False(t, res.Waitlisted)
				require.Equal(t, seats, res.Registration.Seats)
				admitted += seats
				return
			}
			e := apptest.Refusal(t, err)
			require.Equal(t, "activity_full", e.Code, "%v", err)
			require.NotNil(t, e.Remaining, "a refusal says how many seats are left")
			require.Less(t, *e.Remaining, seats)
			refused = append(refused, seats)
		})
	}
	wg.Wait()
	stop()
	t.Logf("%d seats admitted, %d parties refused, Redis flushed %d times", admitted, len(refused), <-flushed)

	taken := a.AuthorityTaken(t, act.ID)
	require.Equal(t, admitted, taken, "the seats answered 201 are the authority's")
	require.LessOrEqual(t, taken, 60)
	for _, n := range refused {
		require.Greater(t, n, 60-taken, "a party was refused while its seats were free")
	}
}

// TestGroupSignupsOverHTTP: seats in signups, the seats endpoint, events,
// the CSV, the activity's numbers and an idempotent replay of a group
// signup, with the fill policy's promotion on a release.
func TestGroupSignupsOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	inst := apptest.Start(t, apptest.Options{})
	adminAPI := inst.API(t, "admin", true)
	act, err := adminAPI.CreateActivity(ctx, client.NewActivity{Title: "groups", Capacity: 5, Waitlist: true,
		MaxSeatsPerRegistration: 4, WaitlistPolicy: "fill"})
	require.NoError(t, err)
	require.Equal(t, 4, act.MaxSeatsPerRegistration)
	require.Equal(t, "fill", act.WaitlistPolicy)

	big := inst.MustSignup(t, act.ID, "a", client.SignupOptions{Seats: 3})
	require.Equal(t, 3, big.Seats)
	b := inst.MustSignup(t, act.ID, "b", client.SignupOptions{Seats: 2})
	c, err := inst.Signup(t, act.ID, "c", client.SignupOptions{Seats: 3, IdempotencyKey: "c-1"})
	require.NoError(t, err)
	require.True(t, c.Waitlisted)
	replay, err := inst.Signup(t, act.ID, "c", client.SignupOptions{Seats: 3, IdempotencyKey: "c-1"})
	require.NoError(t, err)
	require.Equal(t, c.Registration.ID, replay.Registration.ID, "a replay returns the original answer")
	_, err = inst.Signup(t, act.ID, "c", client.SignupOptions{Seats: 2, IdempotencyKey: "c-1"})
	require.Equal(t, "idempotency_conflict", apptest.Refusal(t, err).Code, "the seats are part of the request")
	d, err := inst.Signup(t, act.ID, "d", client.SignupOptions{Seats: 1})
	require.NoError(t, err)
	require.True(t, d.Waitlisted)

	r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+act.ID+"/registrations", inst.Token(t, "e", false), map[string]any{"seats": 5})
	require.Equal(t, http.StatusBadRequest, r.Status, "more than max_seats_per_registration")
	r = inst.MustDo(t, http.MethodPost, "/v1/activities/"+act.ID+"/registrations", inst.Token(t, "e", false), map[string]any{"seats": 0})
	require.Equal(t, http.StatusBadRequest, r.Status)

	// B gives one seat back: D (1) is promoted at once, C keeps its place.
	reduced, err := inst.API(t, "b", false).ReduceSeats(ctx, b.ID, 1)
	require.NoError(t, err)
	require.Equal(t, 1, reduced.Seats)
	require.Equal(t, client.Pending, getReg(t, inst, d.Registration.ID).Status)
	require.Equal(t, 1, position(getReg(t, inst, c.Registration.ID)))
	_, err = inst.API(t, "b", false).ReduceSeats(ctx, b.ID, 2)
	require.Equal(t, "invalid_transition", apptest.Refusal(t, err).Code, "seats are given back, never added")

	got, err := adminAPI.GetActivity(ctx, act.ID)
	require.NoError(t, err)
	require.Equal(t, [3]int{5, 0, 1}, [3]int{got.Taken, got.Remaining, got.Waiting}, "taken counts seats")
	seats, err := inst.Public().Seats(ctx, act.ID)
	require.NoError(t, err)
	require.Equal(t, 5, seats.Taken)

	evs, err := adminAPI.RegistrationEvents(ctx, b.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, string(registration.EventSeatsChanged), evs[1].Type)
	require.Equal(t, 1, evs[1].Seats)
	require.Equal(t, 2, *evs[1].SeatsFrom)

	// A cancels: C (3) fits in the 3 seats freed.
	_, err = inst.API(t, "a", false).CancelRegistration(ctx, big.ID)
	require.NoError(t, err)
	require.Equal(t, client.Pending, getReg(t, inst, c.Registration.ID).Status)

	export := inst.MustDo(t, http.MethodGet, "/v1/activities/"+act.ID+"/registrations.csv", inst.Token(t, "admin", true), nil)
	rows, err := csv.NewReader(strings.NewReader(string(export.Body))).ReadAll()
	require.NoError(t, err)
	require.Equal(t, []string{"id", "user_id", "status", "created_at", "updated_at", "expires_at", "metadata", "seats", "block_id"}, rows[0])
	require.Equal(t, []string{big.ID, "3"}, []string{rows[1][0], rows[1][7]})
	require.Equal(t, []string{b.ID, "1"}, []string{rows[2][0], rows[2][7]})
}
