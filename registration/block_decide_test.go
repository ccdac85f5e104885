package registration_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/registration"
)

func blockState(capacity, taken, waiting int, blocks ...registration.Block) registration.ActivityState {
	return registration.ActivityState{
		Activity: registration.Activity{ID: "a_1", Capacity: capacity, Taken: taken, Waiting: waiting, Waitlist: true,
			MaxSeats: 5, Policy: registration.PolicyStrict},
		LastSeq: 10, At: time.Now(), Registrations: map[string]registration.Registration{}, Holders: map[string]string{},
		Blocks: blocks,
	}
}

func codeBlock(id, code string, seats, used int) registration.Block {
	return registration.Block{ID: id, ActivityID: "a_1", Seats: seats, Used: used, Code: &code}
}

func signup(user, code string, seats int) registration.SignupCommand {
	return registration.SignupCommand{RegistrationID: "r_" + user, UserID: user, Seats: seats, Code: code}
}

// TestBlockRules: the rule of blocks on the state of one activity.
func TestBlockRules(t *testing.T) {
	t.Parallel()
	now := time.Now()
	t.Run("reserved seats are not free to the public", func(t *testing.T) {
		p, err := registration.Decide(blockState(10, 6, 0, codeBlock("b_1", "X", 4, 0)), []registration.Command{signup("u", "", 1)}, now)
		require.NoError(t, err)
		require.Equal(t, registration.Waitlisted, p.Outcomes[0].Registration.Status)
		require.Equal(t, 4, p.Activity.Reserved)
		require.Equal(t, 0, p.Activity.Remaining)
	})
	t.Run("a party takes the block only when it has room for all", func(t *testing.T) {
		p, err := registration.Decide(blockState(10, 4, 0, codeBlock("b_1", "X", 4, 2)),
			[]registration.Command{signup("big", "X", 3), signup("small", "X", 2)}, now)
		require.NoError(t, err)
		big, small := p.Outcomes[0].Registration, p.Outcomes[1].Registration
		require.Nil(t, big.BlockID, "3 do not fit the block's 2: public seats")
		require.Equal(t, registration.Pending, big.Status)
		require.Equal(t, "b_1", *small.BlockID)
		require.Equal(t, 9, p.Activity.Taken)
		require.Equal(t, 0, p.Activity.Reserved)
		require.Equal(t, []registration.BlockChange{{Block: codeBlock("b_1", "X", 4, 4)}}, p.Blocks)
	})
	t.Run("a lowered capacity is not overdrawn by a block", func(t *testing.T) {
		p, err := registration.Decide(blockState(5, 5, 0, codeBlock("b_1", "X", 4, 0)), []registration.Command{signup("u", "X", 1)}, now)
		require.NoError(t, err)
		require.Nil(t, p.Outcomes[0].Registration.BlockID)
		require.Equal(t, registration.Waitlisted, p.Outcomes[0].Registration.Status)
	})
	t.Run("giving seats back returns them to the block", func(t *testing.T) {
		b := "b_1"
		st := blockState(9, 8, 1, codeBlock("b_1", "X", 4, 3))
		st.Registrations["r_s"] = registration.Registration{ID: "r_s", ActivityID: "a_1", UserID: "s", Status: registration.Approved,
			Seats: 3, BlockID: &b}
		st.Line = []registration.Registration{{ID: "r_w", ActivityID: "a_1", UserID: "w", Status: registration.Waitlisted, Seats: 1, WaitlistSeq: 9}}
		p, err := registration.Decide(st, []registration.Command{
			registration.SeatsCommand{RegistrationID: "r_s", Seats: 1, Caller: registration.Caller{Admin: true}},
		}, now)
		require.NoError(t, err)
		require.Equal(t, 6, p.Activity.Taken)
		require.Equal(t, 3, p.Activity.Reserved)
		require.Len(t, p.Events, 1, "nobody is promoted into block seats")
	})
	t.Run("an unknown code is refused", func(t *testing.T) {
		p, err := registration.Decide(blockState(10, 0, 0), []registration.Command{signup("u", "NOPE", 1)}, now)
		require.NoError(t, err)
		require.ErrorContains(t, p.Outcomes[0].Err, "code is not valid")
	})
	t.Run("an expiry of a block that has ended changes nothing", func(t *testing.T) {
		p, err := registration.Decide(blockState(10, 2, 0), []registration.Command{
			registration.BlockCommand{Origin: registration.Origin{Actor: registration.ActorSystem}, Op: registration.BlockExpire, BlockID: "b_1"},
		}, now)
		require.NoError(t, err)
		require.NoError(t, p.Outcomes[0].Err, "another instance expired it first: not an error")
		require.False(t, p.Outcomes[0].Changed)
		require.Empty(t, p.Events)
		p, err = registration.Decide(blockState(10, 2, 0), []registration.Command{
			registration.BlockCommand{Op: registration.BlockDelete, BlockID: "b_1"},
		}, now)
		require.NoError(t, err)
		require.ErrorContains(t, p.Outcomes[0].Err, "block b_1 not found", "a deletion of an ended block is not_found")
	})
	t.Run("a block larger than the free seats is refused", func(t *testing.T) {
		p, err := registration.Decide(blockState(10, 7, 0), []registration.Command{
			registration.BlockCommand{Op: registration.BlockCreate, BlockID: "b_2", New: registration.NewBlock{Seats: 4, Role: "r"}},
		}, now)
		require.NoError(t, err)
		require.ErrorContains(t, p.Outcomes[0].Err, "has only 3 of the 4 seats asked left")
		require.Empty(t, p.Events)
	})
}
