package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// TestTheOnSalePageFollowsTheQueue: an activity's on-sale page shows its
// queue's settings and numbers, and the numbers move (polled every 2 s)
// as users join through the API: the first is admitted with a token, the
// second waits behind the cap. An activity without a queue says so. Both
// pages pass axe-core in every language.
func TestTheOnSalePageFollowsTheQueue(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ctx := context.Background()
	a, err := inst.API(t, "admin", true).CreateActivity(ctx, client.NewActivity{Title: "Vaccination day", Capacity: 10,
		Queue: &client.QueueSettings{AdmitPerSecond: 1, MaxAdmitted: 1, TokenSeconds: 600, AbsentSeconds: 600}})
	require.NoError(t, err)
	plain := inst.CreateActivity(t, "Journal club", 5)
	path := "/console/activities/" + a.ID + "/onsale"

	plAccessibleEverywhere(t, inst, path, "/console/activities/"+plain+"/onsale", path+"/numbers")
	s := signInTab(t, inst, "en", "ana", "admin")
	s.open("/console/activities/" + plain + "/onsale")
	require.Equal(t, 1, countOf(t, s.ctx, "#onsale-no-queue"))

	s.open(path)
	require.Equal(t, 0, countOf(t, s.ctx, "#onsale-no-queue"))
	require.Equal(t, "none", attr(t, s.ctx, "#onsale-numbers", "data-state"))
	require.Equal(t, "0", text(t, s.ctx, "#onsale-numbers [data-field=tokens_out]"))

	_, err = inst.API(t, "first", false).JoinQueue(ctx, a.ID)
	require.NoError(t, err)
	do(t, s.ctx, 20*time.Second,
		waitTrue(`document.querySelector('#onsale-numbers').dataset.state === 'open'`, 15*time.Second, "the line to open"),
		waitText("#onsale-numbers [data-field=tokens_out]", "1", 15*time.Second),
		waitText("#onsale-numbers [data-field=admitted]", "1", 5*time.Second),
		waitText("#onsale-numbers [data-field=rate]", "1", 5*time.Second),
	)
	_, err = inst.API(t, "second", false).JoinQueue(ctx, a.ID)
	require.NoError(t, err)
	do(t, s.ctx, 20*time.Second, waitText("#onsale-numbers [data-field=waiting]", "1", 15*time.Second))
	require.Equal(t, "1", text(t, s.ctx, "#onsale-numbers [data-field=tokens_out]"), "the cap holds the second back")
}
