package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// TestSeriesActivitiesListsTheSeriesOwn: a series lists its activities,
// newest first, in keyset pages, and not another series' or those of no
// series; an unknown series is not_found.
func TestSeriesActivitiesListsTheSeriesOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(testenv.Pool(t, testenv.NewDatabase(t), 4))
	regs := registration.NewService(registration.Config{Store: st})
	t.Cleanup(func() { _ = regs.Close(context.Background()) })
	spring, err := regs.CreateSeries(ctx, registration.NewSeries{Title: "spring", MaxPerUser: 2})
	require.NoError(t, err)
	autumn, err := regs.CreateSeries(ctx, registration.NewSeries{Title: "autumn", MaxPerUser: 1})
	require.NoError(t, err)
	var want []string
	for i := range 5 {
		series := spring.ID
		if i == 2 {
			series = autumn.ID
		}
		a, err := regs.CreateActivity(ctx, registration.NewActivity{Title: fmt.Sprint("workshop ", i), Capacity: 10,
			HoldSeconds: 900, SeriesID: series})
		require.NoError(t, err)
		if series == spring.ID {
			want = append([]string{a.ID}, want...)
		}
	}
	_, err = regs.CreateActivity(ctx, registration.NewActivity{Title: "alone", Capacity: 10, HoldSeconds: 900})
	require.NoError(t, err)

	first, err := regs.SeriesActivities(ctx, spring.ID, "", 3)
	require.NoError(t, err)
	require.NotNil(t, first.NextCursor)
	after, err := registration.DecodeCursor(*first.NextCursor, registration.ActivityCursor)
	require.NoError(t, err)
	second, err := regs.SeriesActivities(ctx, spring.ID, after, 3)
	require.NoError(t, err)
	require.Nil(t, second.NextCursor)
	var got []string
	for _, a := range append(first.Items, second.Items...) {
		require.Equal(t, spring.ID, *a.SeriesID)
		got = append(got, a.ID)
	}
	require.Equal(t, want, got)

	_, err = regs.SeriesActivities(ctx, "s_01JDQ8X2T5V7W9Y1Z3A5C7E9G1", "", 0)
	require.True(t, capacityd.IsCode(err, capacityd.ENotFound), "%v", err)
}
