package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfirmOrReleaseOfManyActivitiesSharesTransactions: the releases of
// activities due at one moment go to the change path together, so that
// fewer transactions than activities release them, on two instances that
// both run the due work; each activity's unconfirmed is released once,
// by the service, and the first in its line is promoted in the same
// transaction, right after the release.
func TestConfirmOrReleaseOfManyActivitiesSharesTransactions(t *testing.T) {
	t.Parallel()
	const activities = 6
	insts := twoInstances(t)
	inst := insts[0]
	admin := inst.Token(t, "organiser", true)
	acts := make([]string, activities)
	unsure := make([]string, activities)
	waiting := make([]string, activities)
	for i := range acts {
		acts[i] = inst.CreateWaitlisted(t, fmt.Sprintf("seminar %d", i), 2)
		sure := inst.MustSignup(t, acts[i], fmt.Sprintf("sure%d", i))
		unsure[i] = inst.MustSignup(t, acts[i], fmt.Sprintf("unsure%d", i)).ID
		waiting[i] = mustWaitlist(t, inst, acts[i], fmt.Sprintf("next%d", i)).ID
		r := inst.MustDo(t, http.MethodPost, "/v1/registrations/"+sure.ID+"/confirm", admin, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	confirmBy := time.Now().Add(2 * time.Second).UTC()
	for _, id := range acts {
		patchActivity(t, inst, admin, id, map[string]any{"confirm_by": confirmBy.Format(time.RFC3339Nano)})
	}
	require.Eventually(t, func() bool {
		for _, id := range unsure {
			if readReg(t, insts[1], admin, id).Status != "cancelled" {
				return false
			}
		}
		return true
	}, 20*time.Second, 100*time.Millisecond, "every unconfirmed is released at confirm_by")

	transactions := map[time.Time]bool{}
	for i, id := range acts {
		r := inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/events?limit=500", admin, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var page struct {
			Items []struct {
				feedEvent
				Actor string    `json:"actor"`
				At    time.Time `json:"at"`
			}
		}
		r.JSON(t, &page)
		released := 0
		for k, e := range page.Items {
			if e.Type != "registration.released" {
				continue
			}
			released++
			assert.Equal(t, unsure[i], e.RegistrationID)
			require.NotNil(t, e.Reason)
			assert.Equal(t, "unconfirmed", *e.Reason)
			assert.Equal(t, "system", e.Actor)
			assert.False(t, e.At.Before(confirmBy), "not before confirm_by")
			transactions[e.At] = true
			require.Less(t, k+1, len(page.Items))
			next := page.Items[k+1]
			assert.Equal(t, "registration.promoted", next.Type, "the promotion comes right after the release")
			assert.Equal(t, waiting[i], next.RegistrationID, "the first in line")
			assert.True(t, next.At.Equal(e.At), "in the releasing transaction")
		}
		assert.Equal(t, 1, released, "activity %d's unconfirmed released once", i)
	}
	assert.Less(t, len(transactions), activities, "the releases shared transactions")
}
