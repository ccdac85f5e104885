package onsale_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// TestAdmissionNeverPromisesASeatThatIsNotThere: 40 in line for 10 seats
// with max_admitted 100, without a waiting list, over two instances: every
// holder signs up as soon as it is admitted; ten are seated, nobody is
// admitted and then refused as full, and the other thirty are told sold
// out. At the authority exactly ten tokens ever went out.
func TestAdmissionNeverPromisesASeatThatIsNotThere(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	insts := []*apptest.Instance{a, b}
	opens := time.Now().Add(time.Hour)
	act, err := a.API(t, "admin", true).CreateActivity(ctx, client.NewActivity{Title: "ten seats", Capacity: 10, OpensAt: &opens,
		Queue: &client.QueueSettings{AdmitPerSecond: 1000, MaxAdmitted: 100}})
	require.NoError(t, err)
	const n = 40
	for i := range n {
		_, err := insts[i%2].API(t, fmt.Sprint("rush-", i), false).JoinQueue(ctx, act.ID)
		require.NoError(t, err)
	}
	now := time.Now()
	_, err = b.API(t, "admin", true).UpdateActivity(ctx, act.ID, client.ActivityPatch{OpensAt: &now})
	require.NoError(t, err)

	var seated, refused, soldOut atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			user, inst := fmt.Sprint("rush-", i), insts[(i+1)%2]
			assert.Eventually(t, func() bool {
				tk, err := inst.API(t, user, false).QueueTicket(ctx, act.ID)
				if !assert.NoError(t, err) {
					return true
				}
				switch {
				case tk.State == "admitted" && tk.AdmissionToken != nil:
					if _, err := inst.Signup(t, act.ID, user, client.SignupOptions{AdmissionToken: *tk.AdmissionToken}); err != nil {
						refused.Add(1)
						t.Errorf("position %d admitted, then refused: %v", *tk.Position, err)
					} else {
						seated.Add(1)
					}
					return true
				case tk.State == "sold_out":
					soldOut.Add(1)
					return true
				}
				return false
			}, 30*time.Second, 50*time.Millisecond, "%s neither admitted nor told sold out", user)
		})
	}
	wg.Wait()
	require.Zero(t, refused.Load(), "admitted then refused")
	require.EqualValues(t, 10, seated.Load())
	require.EqualValues(t, n-10, soldOut.Load())
	require.Equal(t, 10, a.AuthorityTaken(t, act.ID))
	conn, err := pgx.Connect(ctx, a.DatabaseURL)
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var tokens int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM queue_ticket WHERE token IS NOT NULL`).Scan(&tokens))
	require.Equal(t, 10, tokens, "no token beyond the seats")
}

// TestAPollBeforeTheOpeningPointsJustPastIt: a place polled 12 s before
// the opening, on either instance, is told to come back in the first
// 1.5 s after it, however many ask.
func TestAPollBeforeTheOpeningPointsJustPastIt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	insts := []*apptest.Instance{a, b}
	opens := time.Now().Add(12 * time.Second)
	act, err := a.API(t, "admin", true).CreateActivity(ctx, client.NewActivity{Title: "soon", Capacity: 10, OpensAt: &opens,
		Queue: &client.QueueSettings{AdmitPerSecond: 10, MaxAdmitted: 10}})
	require.NoError(t, err)
	for i := range 20 {
		api := insts[i%2].API(t, fmt.Sprint("early-", i), false)
		asked := time.Now()
		tk, err := api.JoinQueue(ctx, act.ID)
		if i%4 == 3 {
			asked = time.Now()
			tk, err = api.QueueTicket(ctx, act.ID)
		}
		answered := time.Now()
		require.NoError(t, err)
		require.Equal(t, "waiting", tk.State)
		back := time.Duration(tk.PollAfterMS) * time.Millisecond
		require.False(t, answered.Add(back).Before(opens), "poll %d: back %v before the opening", i, opens.Sub(answered.Add(back)))
		require.LessOrEqual(t, asked.Add(back).Sub(opens), 1500*time.Millisecond, "poll %d: back too late after the opening", i)
	}
}

// TestAUsedTokenReadsUsedEverywhereSoon: a token used on one instance
// reads used there at once (the signup's commit forgets the place), and on
// the other once its next advance counts the token used, which sends its
// cached admitted places back to the authority (the time it took is
// logged: a tick or so, not the second an admitted place is otherwise
// kept).
func TestAUsedTokenReadsUsedEverywhereSoon(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	act, err := a.API(t, "admin", true).CreateActivity(ctx, client.NewActivity{Title: "used", Capacity: 10,
		Queue: &client.QueueSettings{AdmitPerSecond: 100, MaxAdmitted: 10}})
	require.NoError(t, err)
	var tk client.Ticket
	for _, inst := range []*apptest.Instance{a, b} {
		_, err := inst.API(t, "u", false).JoinQueue(ctx, act.ID)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			tk, err = inst.API(t, "u", false).QueueTicket(ctx, act.ID)
			return err == nil && tk.State == "admitted"
		}, 10*time.Second, 20*time.Millisecond, "admitted, as both instances read it")
	}
	_, err = a.Signup(t, act.ID, "u", client.SignupOptions{AdmissionToken: *tk.AdmissionToken})
	require.NoError(t, err)
	here, err := a.API(t, "u", false).QueueTicket(ctx, act.ID)
	require.NoError(t, err)
	require.Equal(t, "used", here.State, "at once where the signup committed")
	used := time.Now()
	require.Eventually(t, func() bool {
		there, err := b.API(t, "u", false).QueueTicket(ctx, act.ID)
		return err == nil && there.State == "used"
	}, 10*time.Second, 20*time.Millisecond)
	t.Logf("used on the other instance after %v", time.Since(used))
}
