package loadtest

import (
	"context"
	"errors"
	"fmt"
)

// signupHotLimited is signup_hot on the hot activity while it holds a
// code block of 10 seats and belongs to a series of at most 2 per user:
// what every signup then pays besides signup_hot's (the blocks read under
// the activity's lock, the (series, user) lock and the count of the
// user's registrations in the series). The block and the series are
// written into the bench database directly and removed after.
func (b *bench) signupHotLimited(ctx context.Context) error {
	defer b.dropLimits(context.WithoutCancel(ctx))
	if _, err := b.db.Exec(ctx, `
		WITH s AS (INSERT INTO series (public_id, title, max_per_user) VALUES ('s_loadtest_limited', 'load test', 2) RETURNING id)
		UPDATE activity SET series_id = (SELECT id FROM s) WHERE id = $1`, b.seed.HotID); err != nil {
		return fatalError{fmt.Errorf("loadtest: put the hot activity in a series: %w", err)}
	}
	if _, err := b.db.Exec(ctx, `INSERT INTO block (public_id, activity_id, seats, code, created_at)
		VALUES ('b_loadtest_limited', $1, 10, 'LOADTEST', now())`, b.seed.HotID); err != nil {
		return fatalError{fmt.Errorf("loadtest: add a block to the hot activity: %w", err)}
	}
	if err := b.driveSignupHot(ctx, ScenarioSignupHotLimited, 64, nil); err != nil {
		return err
	}
	return b.resetHot(ctx)
}

// dropLimits removes the block and the series signupHotLimited added.
func (b *bench) dropLimits(ctx context.Context) {
	_, err1 := b.db.Exec(ctx, `DELETE FROM block WHERE public_id = 'b_loadtest_limited'`)
	_, err2 := b.db.Exec(ctx, `UPDATE activity SET series_id = NULL WHERE id = $1`, b.seed.HotID)
	_, err3 := b.db.Exec(ctx, `DELETE FROM series WHERE public_id = 's_loadtest_limited'`)
	if err := errors.Join(err1, err2, err3); err != nil {
		fmt.Fprintf(b.log, "%-16s cleanup: %v\n", ScenarioSignupHotLimited, err)
	}
}
