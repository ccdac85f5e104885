// Package loop runs the background work every instance does on a timer
// (hold expiry, idempotency purge, display reconciliation, webhook
// delivery), the same way for each.
package loop

import (
	"context"
	"log/slog"
	"time"
)

// Every calls f every interval until ctx ends. Each call gets a context
// bounded by the interval plus ten seconds; its error is logged with what,
// unless ctx ended.
func Every(ctx context.Context, interval time.Duration, log *slog.Logger, what string, f func(context.Context) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			runCtx, cancel := context.WithTimeout(ctx, interval+10*time.Second)
			if err := f(runCtx); err != nil && ctx.Err() == nil {
				log.Warn(what+" failed", "err", err)
			}
			cancel()
		}
	}
}
