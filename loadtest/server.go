package loadtest

import (
	"context"
	"slices"
	"time"

	"github.com/physiciansnet/capacityd/internal/test/launch"
)

// ServerConfig is how to run a capacityd for the scenarios.
type ServerConfig struct {
	Binary      string
	DatabaseURL string
	RedisURL    string
	Secret      string
	// Env adds NAME=value settings (e.g. NOTE_COMBINING=off).
	Env []string
}

// benchEnv keeps background work and rate limits out of the measurements:
// expiry, reconciliation, the webhook backlog refresh, the listing of
// admission queues and the reading of the ticket keys would add
// transactions to the counts (the seat-read and dashboard scenarios count
// every transaction of the bench database), and rate limits would refuse
// the load. The webhook scenario creates its webhooks on this instance,
// which starts delivering at once without a refresh; the on-sale
// scenario's line is advanced by this instance, which takes its joins.
var benchEnv = []string{
	"EXPIRY_INTERVAL=1h", "RECONCILE_INTERVAL=1h", "WEBHOOK_BACKLOG_INTERVAL=1h", "QUEUE_LIST_INTERVAL=1h", "CHECKIN_KEY_REFRESH=1h",
	"RATE_LIMIT_PUBLIC_WRITES=0", "RATE_LIMIT_PUBLIC_READS=0", "RATE_LIMIT_SIGNUPS=0", "NOTE_WATER_WINDOW=0s",
	// The stream scenario opens its 1,000 streams from one address.
	"STREAM_MAX_PER_ADDRESS=0",
	// The scenarios read /metrics on the service's address.
	"METRICS_ADDR=api",
	// signup_hot_webhooks delivers to a receiver on the loopback interface.
	"WEBHOOK_ALLOW_PRIVATE=true", "WEBHOOK_SECRET_KEY=" + benchWebhookKey,
}

// benchWebhookKey seals the webhook secrets of the capacityd the load test
// starts (a throwaway key for a throwaway service).
const benchWebhookKey = "bG9hZHRlc3Qtd2ViaG9vay1rZXktMzItYnl0ZXMhISE="

// stopGrace is how long a capacityd the load test started has to stop
// after SIGTERM before it is killed.
const stopGrace = 20 * time.Second

// StartServer runs `capacityd serve` on a free loopback port and waits
// until /readyz answers 200. The service dies with the load test, however
// that ends; Stop(stopGrace) stops it.
func StartServer(ctx context.Context, c ServerConfig) (*launch.Process, error) {
	return launch.Start(ctx, launch.Config{
		Binary: c.Binary,
		Env: slices.Concat(benchEnv,
			[]string{"DATABASE_URL=" + c.DatabaseURL, "REDIS_URL=" + c.RedisURL, "CAPACITY_JWT_SECRET=" + c.Secret}, c.Env),
		// The end of its output, for an error of a run that it fails.
		Output:        &launch.Output{Max: 64 * 1024},
		ReadyPath:     "/readyz",
		DieWithParent: true,
	})
}
