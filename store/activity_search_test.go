package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// TestActivitiesAreSearchedByTitle: the title search finds the titles
// that contain the query in any case, newest first, in keyset pages that
// continue the same search; LIKE's characters match themselves; an empty
// query lists every activity.
func TestActivitiesAreSearchedByTitle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(testenv.Pool(t, testenv.NewDatabase(t), 4))
	regs := registration.NewService(registration.Config{Store: st})
	t.Cleanup(func() { _ = regs.Close(context.Background()) })
	titles := []string{"Cardiology rounds", "心臟科晨會", "Journal club", "cardiology: 100% echo", "Ward_round", "Wardxround", "CARDIOLOGY workshop"}
	ids := map[string]string{}
	for _, title := range titles {
		a, err := regs.CreateActivity(ctx, registration.NewActivity{Title: title, Capacity: 10})
		require.NoError(t, err)
		ids[title] = a.ID
	}
	search := func(q string, limit int) []string {
		var got []string
		before := ""
		for {
			p, err := regs.SearchActivities(ctx, q, before, limit)
			require.NoError(t, err)
			require.LessOrEqual(t, len(p.Items), limit)
			for _, a := range p.Items {
				got = append(got, a.Title)
			}
			if p.NextCursor == nil {
				return got
			}
			before, err = registration.DecodeCursor(*p.NextCursor, registration.ActivityCursor)
			require.NoError(t, err)
		}
	}
	require.Equal(t, []string{"CARDIOLOGY workshop", "cardiology: 100% echo", "Cardiology rounds"}, search("cardiology", 2))
	require.Equal(t, []string{"CARDIOLOGY workshop", "cardiology: 100% echo", "Cardiology rounds"}, search("  Cardiology ", 1))
	require.Equal(t, []string{"心臟科晨會"}, search("晨會", 10))
	require.Equal(t, []string{"cardiology: 100% echo"}, search("100%", 10))
	require.Equal(t, []string{"Ward_round"}, search("d_r", 10))
	require.Empty(t, search("nothing like it", 10))
	require.Len(t, search("", 3), len(titles))

	p, err := regs.SearchActivities(ctx, "round", "", 10)
	require.NoError(t, err)
	require.Equal(t, ids["Ward_round"], p.Items[1].ID)
	require.Equal(t, 10, p.Items[0].Capacity)
	_, err = regs.SearchActivities(ctx, "round", ids["nope"]+"a_00000000000000000000000000", 10)
	require.Equal(t, capacityd.EInvalid, capacityd.ErrorCode(err))
	_, err = regs.SearchActivities(ctx, "x\x00", "", 10)
	require.Equal(t, capacityd.EInvalid, capacityd.ErrorCode(err))
}
