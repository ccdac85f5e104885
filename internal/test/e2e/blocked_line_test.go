package e2e

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

type blockedRead struct {
	Waiting       int `json:"waiting"`
	LineBlockedBy *struct {
		RegistrationID string `json:"registration_id"`
		Seats          int    `json:"seats"`
	} `json:"line_blocked_by"`
}

// TestALoweredCapacityThatBlocksAStrictLineIsShown lowers a capacity
// below a waiting party's seats: nobody is evicted, the line waits behind
// the party, and the admin sees why (line_blocked_by) in the PATCH's
// answer and in reads, until a raise holds the party.
func TestALoweredCapacityThatBlocksAStrictLineIsShown(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	admin := inst.Token(t, "organiser", true)
	act := inst.CreateWaitlistedParties(t, "dinner", 4, 4)
	inst.MustSignup(t, act, "alone")
	party, err := inst.Signup(t, act, "party", client.SignupOptions{Seats: 4})
	require.NoError(t, err)
	require.True(t, party.Waitlisted, "4 seats do not fit beside 1")
	read := func() blockedRead {
		r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+act, admin, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var b blockedRead
		r.JSON(t, &b)
		return b
	}
	assert.Nil(t, read().LineBlockedBy, "a party that a raise of seats can seat does not block the line")

	r := inst.MustDo(t, http.MethodPatch, "/v1/activities/"+act, admin, map[string]any{"capacity": 3})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var patched blockedRead
	r.JSON(t, &patched)
	require.NotNil(t, patched.LineBlockedBy, "the PATCH's answer says the line is blocked")
	assert.Equal(t, party.Registration.ID, patched.LineBlockedBy.RegistrationID)
	assert.Equal(t, 4, patched.LineBlockedBy.Seats)

	small, err := inst.Signup(t, act, "single")
	require.NoError(t, err)
	assert.True(t, small.Waitlisted, "a strict line: the single waits behind the party")
	b := read()
	require.NotNil(t, b.LineBlockedBy)
	assert.Equal(t, 2, b.Waiting)

	r = inst.MustDo(t, http.MethodPatch, "/v1/activities/"+act, admin, map[string]any{"capacity": 6})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	b = read()
	assert.Nil(t, b.LineBlockedBy, "a raise that holds the party unblocks the line")
	assert.Equal(t, 0, b.Waiting, "the party and the single are promoted")
}
