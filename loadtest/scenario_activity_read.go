package loadtest

import (
	"context"
	"errors"
	"sync"
)

// activityReadClients is the number of clients of each half of
// activity_read: as many signing up as signup_hot's, as many reading.
const activityReadClients = 64

// activityRead is signup_hot's load on the hot activity while as many more
// clients read GET /v1/activities/{id} of it anonymously, back to back:
// the public read must not slow the signups down (its seats come from the
// display tier, its settings from the instance's activity cache). It
// reports the signups as activity_read and the reads as
// activity_read_reads, then removes the rows it added.
func (b *bench) activityRead(ctx context.Context) error {
	n := b.maxSignups()
	toks, err := b.tokens(ScenarioActivityRead, n)
	if err != nil {
		return err
	}
	hot := b.seed.HotActivity
	if err := b.warmSeats(ctx, hot); err != nil {
		return err
	}
	var reads Outcome
	var wg sync.WaitGroup
	wg.Go(func() {
		reads = Drive(ctx, Load{Name: ScenarioActivityReadReads, Clients: activityReadClients, Duration: b.cfg.ScenarioDuration}, b.log,
			func(ctx context.Context, _ int, _ int64) error {
				a, err := b.api.GetActivity(ctx, hot)
				if err == nil && a.Source == "" {
					err = errors.New("activity read: no source, want the display tier's numbers")
				}
				return err
			})
	})
	out := b.drive(ctx, Load{Name: ScenarioActivityRead, Clients: activityReadClients, Duration: b.cfg.ScenarioDuration, MaxOps: int64(n)},
		func(ctx context.Context, _ int, i int64) error {
			return b.signupAdmitted(ctx, toks[i], hot)
		})
	wg.Wait()
	b.report.Scenarios[ScenarioActivityRead] = out.Result(activityReadClients)
	b.report.Scenarios[ScenarioActivityReadReads] = reads.Result(activityReadClients)
	return b.resetHot(ctx)
}
