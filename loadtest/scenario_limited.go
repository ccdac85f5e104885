package loadtest

import (
	"context"
	"errors"
	"fmt"

	"github.com/physiciansnet/capacityd/client"
)

// signupHotLimited is signup_hot on the hot activity while it holds a
// code block of 10 seats and belongs to a series of at most 2 per user:
// what every signup then pays besides signup_hot's (the blocks read under
// the activity's lock, the (series, user) lock and the count of the
// user's registrations in the series). The block and the series are made
// through the API, as an organiser would; the block is deleted and the
// activity leaves the series after. Plain signup_hot runs just before and
// just after it, on the same capacityd, as its baseline.
func (b *bench) signupHotLimited(ctx context.Context) error {
	if err := b.signupHotPlain(ctx, ScenarioSignupHotBefore); err != nil {
		return err
	}
	if err := b.driveLimited(ctx); err != nil {
		return err
	}
	return b.signupHotPlain(ctx, ScenarioSignupHotAfter)
}

// signupHotPlain is one of signup_hot_limited's baselines: signup_hot's
// load, reported as name, the hot activity reset after.
func (b *bench) signupHotPlain(ctx context.Context, name string) error {
	if err := b.driveSignupHot(ctx, name, 64, nil); err != nil {
		return err
	}
	return b.resetHot(ctx)
}

// driveLimited is signup_hot_limited's own load, between its baselines.
func (b *bench) driveLimited(ctx context.Context) error {
	admin := b.api.WithToken(b.admin)
	series, err := admin.CreateSeries(ctx, client.NewSeries{Title: "load test", MaxPerUser: 2})
	if err != nil {
		return fatalError{fmt.Errorf("loadtest: create a series: %w", err)}
	}
	defer b.dropLimits(context.WithoutCancel(ctx))
	if _, err := admin.UpdateActivity(ctx, b.seed.HotActivity, client.ActivityPatch{SeriesID: &series.ID}); err != nil {
		return fatalError{fmt.Errorf("loadtest: put the hot activity in a series: %w", err)}
	}
	if b.limitedBlock, err = admin.CreateBlock(ctx, b.seed.HotActivity, client.NewBlock{Seats: 10, Code: "LOADTEST"}); err != nil {
		return fatalError{fmt.Errorf("loadtest: add a block to the hot activity: %w", err)}
	}
	if err := b.driveSignupHot(ctx, ScenarioSignupHotLimited, 64, nil); err != nil {
		return err
	}
	return b.resetHot(ctx)
}

// dropLimits deletes the block signupHotLimited made and takes the hot
// activity out of its series.
func (b *bench) dropLimits(ctx context.Context) {
	admin := b.api.WithToken(b.admin)
	var err1 error
	if b.limitedBlock.ID != "" {
		err1 = admin.DeleteBlock(ctx, b.limitedBlock.ID)
	}
	none := ""
	_, err2 := admin.UpdateActivity(ctx, b.seed.HotActivity, client.ActivityPatch{SeriesID: &none})
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintf(b.log, "%-16s cleanup: %v\n", ScenarioSignupHotLimited, err)
	}
}
