package capacity_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/registration"
)

// gateCalls counts the gate's script runs and the round trips that
// carried them.
type gateCalls struct {
	runs, pipelines, alone atomic.Int64
}

func isGateRun(cmd redis.Cmder) bool {
	n := strings.ToLower(cmd.Name())
	return n == "evalsha" || n == "eval"
}

func (g *gateCalls) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (g *gateCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isGateRun(cmd) {
			g.runs.Add(1)
			g.alone.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (g *gateCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if isGateRun(c) {
				n++
			}
		}
		if n > 0 {
			g.runs.Add(int64(n))
			g.pipelines.Add(1)
		}
		return next(ctx, cmds)
	}
}

// TestGateRunsOfACrowdShareRoundTrips: 300 signups for 50 seats that
// come at once hold exactly 50 seats, and their gate runs reach Redis in
// shared pipelines rather than one round trip each.
func TestGateRunsOfACrowdShareRoundTrips(t *testing.T) {
	b := setup(t)
	id := b.warm(t, 50, false)
	calls := &gateCalls{}
	b.rdb.AddHook(calls)

	const crowd = 300
	start := make(chan struct{})
	var held, full atomic.Int64
	var wg sync.WaitGroup
	for range crowd {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			<-start
			h, err := b.counter.Reserve(ctx, id, 1)
			switch {
			case err == nil && h.Held():
				held.Add(1)
			case errors.Is(err, registration.ErrGateFull):
				full.Add(1)
			default:
				assert.NoError(t, err)
			}
		})
	}
	close(start)
	wg.Wait()

	require.Equal(t, int64(50), held.Load(), "exactly the seats are held")
	require.Equal(t, int64(crowd-50), full.Load(), "every other signup is refused by the gate")
	assert.GreaterOrEqual(t, calls.runs.Load(), int64(crowd), "every signup ran the gate")
	assert.Zero(t, calls.alone.Load(), "the gate runs go in pipelines")
	assert.Less(t, calls.pipelines.Load(), int64(crowd/2), "the runs that came at once shared pipelines")
	t.Logf("%d gate runs in %d pipelines", calls.runs.Load(), calls.pipelines.Load())
}
