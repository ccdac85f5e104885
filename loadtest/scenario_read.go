package loadtest

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/client"
)

// readClients is the concurrency of the read and views scenarios.
const readClients = 64

// maxReadRate bounds the operations of a timed read scenario, far above
// what two cores serve: the time bounds it first.
const maxReadRate = 500000

func maxReads(d time.Duration) int64 { return int64(d.Seconds()*maxReadRate) + 1000 }

// reads runs trivial (GET /healthz, the ceiling of the HTTP stack on this
// machine) and then seats_read on the hot activity with the cache warm,
// counting the transactions the bench database saw meanwhile.
func (b *bench) reads(ctx context.Context) error {
	hot := b.seed.HotActivity
	// A fresh display counter: its TTL cannot run out during the scenario.
	if b.rdb != nil && b.cfg.ServiceURL == "" {
		if err := b.rdb.Del(ctx, capacity.Key(b.seed.HotActivity)).Err(); err != nil {
			return fmt.Errorf("loadtest: reset the hot counter: %w", err)
		}
	}
	if err := b.warmSeats(ctx, hot); err != nil {
		return err
	}
	// The stream scenario runs next; its activity is made now so that the
	// wait below serves it too.
	if b.cfg.wants(ScenarioSSEFanout) {
		id, err := b.prepareSSE(ctx)
		if err != nil {
			return err
		}
		b.sseActivity = id
	}
	warmed := time.Now()
	d := b.cfg.ScenarioDuration
	if b.cfg.wants(ScenarioTrivial) {
		out := b.drive(ctx, Load{Name: ScenarioTrivial, Clients: readClients, Duration: d, MaxOps: maxReads(d)},
			func(ctx context.Context, _ int, _ int64) error {
				return b.api.Health(ctx)
			})
		b.report.Scenarios[ScenarioTrivial] = out.Result(readClients)
	}
	if !b.cfg.wants(ScenarioSeatsRead) {
		return nil
	}
	// Idle backends flush their statistics up to 10 s late: let the
	// warm-up's rebuild reach pg_stat_database before the first reading.
	if err := sleep(ctx, b.cfg.StatsIdleWait-time.Since(warmed)); err != nil {
		return err
	}
	before, err := b.mon.Transactions(ctx)
	if err != nil {
		return err
	}
	m0, err := b.serviceCounters(ctx)
	if err != nil {
		return err
	}
	r0, err := b.redisCommands(ctx)
	if err != nil {
		return err
	}
	out := b.drive(ctx, Load{Name: ScenarioSeatsRead, Clients: readClients, Duration: d, MaxOps: maxReads(d)},
		func(ctx context.Context, _ int, _ int64) error {
			_, err := b.api.Seats(ctx, hot)
			return err
		})
	b.report.Scenarios[ScenarioSeatsRead] = out.Result(readClients)
	r1, err := b.redisCommands(ctx)
	if err != nil {
		return err
	}
	if err := sleep(ctx, statsFlushWait); err != nil {
		return err
	}
	after, err := b.mon.Transactions(ctx)
	if err != nil {
		return err
	}
	m1, err := b.serviceCounters(ctx)
	if err != nil {
		return err
	}
	b.report.Checks[CheckSeatsReadPGQueries] = after - before
	b.report.Checks[CheckSeatsReadRedisErrors] = int64(m1.redisErrors - m0.redisErrors)
	b.report.Checks[CheckSeatsReadRebuilds] = int64(m1.rebuilds - m0.rebuilds)
	perRead := float64(r1-r0) / float64(max(out.Ops, 1))
	if b.rdb != nil {
		b.report.Checks[CheckSeatsReadRedisCmds] = r1 - r0
		b.report.Checks[CheckSeatsReadRedisPerOp] = perRead
	}
	fmt.Fprintf(b.log, "%-16s PostgreSQL transactions in the bench database during the scenario: %d (the service counted %d Redis errors and %d cache rebuilds); Redis commands %d, %.4f per read\n",
		ScenarioSeatsRead, after-before, int64(m1.redisErrors-m0.redisErrors), int64(m1.rebuilds-m0.rebuilds), r1-r0, perRead)
	return nil
}

// redisCommands counts the commands the bench Redis ran so far (0 without
// one).
func (b *bench) redisCommands(ctx context.Context) (int64, error) {
	if b.rdb == nil {
		return 0, nil
	}
	return redisCommands(ctx, b.rdb)
}

// serviceCounters are the display tier's counters from /metrics.
type serviceCounters struct{ redisErrors, rebuilds float64 }

func (b *bench) serviceCounters(ctx context.Context) (serviceCounters, error) {
	text, err := b.api.Text(ctx, "/metrics")
	if err != nil {
		return serviceCounters{}, fmt.Errorf("loadtest: read /metrics: %w", err)
	}
	var c serviceCounters
	c.redisErrors, _ = SumMetric(text, "capacityd_redis_errors_total")
	c.rebuilds, _ = SumMetric(text, "capacityd_seat_cache_rebuilds_total")
	return c, nil
}

// warmAllSeats warms the seat cache of every activity, from clients
// concurrent readers (warmSeats for each).
func (b *bench) warmAllSeats(ctx context.Context, activities []string, clients int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(clients)
	for _, a := range activities {
		g.Go(func() error { return b.warmSeats(ctx, a) })
	}
	return g.Wait()
}

// warmCounters counts the activities whose display counter exists in the
// bench Redis.
func (b *bench) warmCounters(ctx context.Context, activities []string) (int64, error) {
	keys := make([]string, len(activities))
	for i, a := range activities {
		keys[i] = capacity.Key(a)
	}
	n, err := b.rdb.Exists(ctx, keys...).Result()
	if err != nil {
		return 0, fmt.Errorf("loadtest: read the seat counters: %w", err)
	}
	return n, nil
}

// warmSeats reads an activity's seats until they come from the cache.
func (b *bench) warmSeats(ctx context.Context, activity string) error {
	var s client.Seats
	for range 50 {
		var err error
		if s, err = b.api.Seats(ctx, activity); err != nil {
			return fmt.Errorf("loadtest: warm the seat cache: %w", err)
		}
		if s.Source == "cache" {
			return nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	fmt.Fprintf(b.log, "warning: seats of %s still come from %q after 50 reads\n", activity, s.Source)
	return nil
}

// views posts views of one hot note (a fresh one per scenario) from 64
// clients.
func (b *bench) views(ctx context.Context, name string) error {
	note := "lt-" + b.nonce + "-" + name
	if _, err := b.api.RecordView(ctx, note); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	out := b.drive(ctx, Load{Name: name, Clients: readClients, Duration: b.cfg.ScenarioDuration, MaxOps: maxReads(b.cfg.ScenarioDuration)},
		func(ctx context.Context, _ int, _ int64) error {
			_, err := b.api.RecordView(ctx, note)
			return err
		})
	b.report.Scenarios[name] = out.Result(readClients)
	return nil
}
