package registration_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

func onSaleState(at time.Time, opens, closes *time.Time, queued bool, places ...registration.AdmittedPlace) registration.ActivityState {
	st := registration.ActivityState{
		Activity: registration.Activity{ID: "a_1", Capacity: 10, MaxSeats: 1, Policy: registration.PolicyStrict,
			OpensAt: opens, ClosesAt: closes},
		LastSeq: 3, At: at, Registrations: map[string]registration.Registration{}, Holders: map[string]string{},
		Admissions: map[string]registration.AdmittedPlace{},
	}
	if queued {
		st.Activity.Queue = &registration.QueueSettings{AdmitPerSecond: 5, MaxAdmitted: 5, TokenSeconds: 60, AbsentSeconds: 60}
	}
	for _, p := range places {
		st.Admissions[p.Token] = p
	}
	return st
}

func admittedSignup(user, token, key string) registration.SignupCommand {
	return registration.SignupCommand{RegistrationID: "r_" + user + key, UserID: user, AdmissionToken: token, IdempotencyKey: key,
		RequestHash: []byte("h")}
}

// TestOnSaleRules: the window and the admission token in the rule, at the
// transaction's clock.
func TestOnSaleRules(t *testing.T) {
	t.Parallel()
	at := time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC)
	before, after := at.Add(-time.Second), at.Add(time.Second)
	code := func(p registration.Plan, i int) string { return capacityd.ErrorCode(p.Outcomes[i].Err) }

	t.Run("the window opens at opens_at and closes at closes_at", func(t *testing.T) {
		for _, c := range []struct {
			opens, closes *time.Time
			want          string
		}{
			{&after, nil, capacityd.ERegistrationClosed},
			{&at, nil, ""},
			{nil, &at, capacityd.ERegistrationClosed},
			{nil, &after, ""},
			{&before, &after, ""},
		} {
			p, err := registration.Decide(onSaleState(at, c.opens, c.closes, false), []registration.Command{signup("u", "", 1)}, at)
			require.NoError(t, err)
			require.Equal(t, c.want, code(p, 0), "opens %v closes %v", c.opens, c.closes)
			if c.want != "" {
				require.Empty(t, p.Inserts)
				require.Empty(t, p.Records, "a closed window is no Idempotency-Key's first outcome")
			}
		}
	})

	t.Run("a queue needs the user's own live token, once", func(t *testing.T) {
		alice := registration.AdmittedPlace{UserID: "alice", Token: "adm_a", ExpiresAt: after}
		late := registration.AdmittedPlace{UserID: "late", Token: "adm_l", ExpiresAt: at}
		st := onSaleState(at, nil, nil, true, alice, late)
		p, err := registration.Decide(st, []registration.Command{
			admittedSignup("bob", "", "k1"),        // none
			admittedSignup("bob", "adm_a", "k2"),   // someone else's
			admittedSignup("late", "adm_l", "k3"),  // expired at the transaction's time
			admittedSignup("alice", "adm_x", "k4"), // unknown
			admittedSignup("alice", "adm_a", "k5"), // admitted
			admittedSignup("alice", "adm_a", "k5"), // the same request again: its replay
			admittedSignup("alice", "adm_a", "k6"), // used
		}, at)
		require.NoError(t, err)
		for i := range 4 {
			require.Equal(t, capacityd.EAdmissionRequired, code(p, i), i)
		}
		require.Equal(t, "", code(p, 4))
		require.Equal(t, registration.Pending, p.Outcomes[4].Registration.Status)
		require.True(t, p.Outcomes[5].Replayed)
		require.Equal(t, capacityd.EAdmissionRequired, code(p, 6))
		require.Equal(t, []string{"adm_a"}, p.UsedTokens)
		require.Len(t, p.Records, 1, "only the admitted signup's key is recorded")
	})

	t.Run("a refusal as full keeps the token", func(t *testing.T) {
		st := onSaleState(at, nil, nil, true, registration.AdmittedPlace{UserID: "u", Token: "adm_u", ExpiresAt: after})
		st.Activity.Capacity = 0
		p, err := registration.Decide(st, []registration.Command{admittedSignup("u", "adm_u", "")}, at)
		require.NoError(t, err)
		require.Equal(t, capacityd.EActivityFull, code(p, 0))
		require.Empty(t, p.UsedTokens)
	})

	t.Run("a patch's window must close after it opens, else it changes nothing", func(t *testing.T) {
		st := onSaleState(at, &before, nil, false)
		closes := &before
		title := "renamed"
		p, err := registration.Decide(st, []registration.Command{registration.ActivityCommand{Patch: registration.ActivityPatch{
			Title: &title, ClosesAt: registration.OptionalOf(&closes)}}}, at)
		require.NoError(t, err)
		require.Equal(t, capacityd.EInvalid, code(p, 0))
		require.False(t, p.ActivityChanged)
		require.Equal(t, "", p.Activity.Title)
	})
}
