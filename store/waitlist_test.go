package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// TestPromotionsReadTheHeadTheyNeed: a cancellation promotes the first in
// line whether the store read the waiting list's head ahead (it last saw
// people waiting), read it only once the counts showed someone waits (it
// last saw nobody waiting, and another store lined users up since), or
// read it again, longer, for a capacity raise in the same batch.
func TestPromotionsReadTheHeadTheyNeed(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabase(t)
	a, b := store.New(testenv.Pool(t, url, 2)), store.New(testenv.Pool(t, url, 2))
	ctx := context.Background()
	id := newID("a")
	_, err := a.CreateActivity(ctx, id, registration.NewActivity{Title: "line", Capacity: 2, HoldSeconds: 900, Waitlist: true})
	require.NoError(t, err)
	apply := func(s *store.Store, cmds ...registration.Command) registration.Plan {
		t.Helper()
		out, err := s.Apply(ctx, []registration.CommandBatch{{ActivityID: id, Commands: cmds}}, time.Now())
		require.NoError(t, err)
		require.NoError(t, out[0].Err)
		for _, o := range out[0].Plan.Outcomes {
			require.NoError(t, o.Err)
		}
		return out[0].Plan
	}
	cancel := func(s registration.SignupCommand) registration.CancelCommand {
		return registration.CancelCommand{RegistrationID: s.RegistrationID, Caller: registration.Caller{UserID: s.UserID}}
	}
	promoted := func(p registration.Plan) []string {
		var out []string
		for _, e := range p.Events {
			if e.Type == registration.EventPromoted {
				out = append(out, e.RegistrationID)
			}
		}
		return out
	}
	seated := []registration.SignupCommand{signupOf("s1"), signupOf("s2")}
	p := apply(a, seated[0], seated[1])
	require.Equal(t, 0, p.Activity.Waiting, "a last saw nobody waiting")

	line := []registration.SignupCommand{signupOf("w1"), signupOf("w2"), signupOf("w3"), signupOf("w4")}
	p = apply(b, line[0], line[1], line[2], line[3])
	require.Equal(t, 4, p.Activity.Waiting)

	p = apply(a, cancel(seated[0]))
	require.Equal(t, []string{line[0].RegistrationID}, promoted(p), "a counts again and reads the head it needs")
	require.Equal(t, 3, p.Activity.Waiting)

	p = apply(a, cancel(seated[1]))
	require.Equal(t, []string{line[1].RegistrationID}, promoted(p), "read ahead: a saw people waiting")

	capacity := 4
	p = apply(a, cancel(line[0]), registration.ActivityCommand{Patch: registration.ActivityPatch{Capacity: &capacity}})
	require.Equal(t, []string{line[2].RegistrationID, line[3].RegistrationID}, promoted(p),
		"the raise needs more than the cancellation's read ahead")
	require.Equal(t, 0, p.Activity.Waiting)
	require.Equal(t, 3, p.Activity.Taken)

	regs, err := a.GetRegistrations(ctx, []string{line[3].RegistrationID, "r_unknown", line[0].RegistrationID})
	require.NoError(t, err)
	require.Len(t, regs, 2, "unknown ids are left out")
	got := map[string]registration.Status{}
	for _, r := range regs {
		got[r.ID] = r.Status
	}
	require.Equal(t, map[string]registration.Status{line[3].RegistrationID: registration.Pending, line[0].RegistrationID: registration.Cancelled}, got)
}
