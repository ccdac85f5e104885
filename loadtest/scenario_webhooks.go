package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// webhookDrainLimit is how long the webhook scenario waits for the
// deliveries to drain after the load stops before it gives up measuring.
const webhookDrainLimit = 60 * time.Second

// hookReceiver is a fast local webhook receiver: it answers 204 to every
// delivery and counts the event ids it got, and how many arrived more
// than once.
type hookReceiver struct {
	srv *http.Server
	url string

	mu         sync.Mutex
	seen       map[string]int
	duplicates int64
}

func startHookReceiver() (*hookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loadtest: webhook receiver: %w", err)
	}
	rc := &hookReceiver{url: "http://" + ln.Addr().String() + "/hook", seen: map[string]int{}}
	rc.srv = &http.Server{Handler: rc, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = rc.srv.Serve(ln) }()
	return rc, nil
}

// ServeHTTP takes one delivery.
func (rc *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	// Each webhook's URL has a query of its own: an event id counts once
	// per webhook.
	key := r.URL.RawQuery + " " + r.Header.Get("webhook-id")
	rc.mu.Lock()
	if rc.seen[key]++; rc.seen[key] > 1 {
		rc.duplicates++
	}
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (rc *hookReceiver) counts() (received int, duplicates int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.seen), rc.duplicates
}

func (rc *hookReceiver) close() { _ = rc.srv.Close() }

// hookSet is a fast local receiver with webhooks for every event
// pointing at it, each with a query of its own.
type hookSet struct {
	*hookReceiver
	ids []string
}

// subscribeHooks starts a receiver and registers n webhooks for every
// event to it. closeHooks deletes the webhooks, with their delivery
// records, and stops the receiver; the scenario names its errors.
func (b *bench) subscribeHooks(ctx context.Context, scenario string, n int) (hs *hookSet, closeHooks func(), err error) {
	rc, err := startHookReceiver()
	if err != nil {
		return nil, nil, err
	}
	hs = &hookSet{hookReceiver: rc}
	closeHooks = func() {
		b.dropWebhooks(context.WithoutCancel(ctx), scenario, hs.ids)
		rc.close()
	}
	for i := range n {
		id, err := b.createWebhook(ctx, fmt.Sprintf("%s?w=%d", rc.url, i))
		if err != nil {
			closeHooks()
			return nil, nil, err
		}
		hs.ids = append(hs.ids, id)
	}
	return hs, closeHooks, nil
}

// signupHotWebhooks is signup_hot with two webhooks subscribed to every
// event pointing at a fast local receiver: the cost of delivery on the
// signup path. After the load it waits for the deliveries to drain, and
// times it: the drain's processor time and WAL count in the scenario's
// (its elapsed time does not), so that the deliveries the load caused are
// all in its cost per signup. Then it deletes the webhooks with their
// delivery records. The capacityd under test must allow private webhook
// URLs (WEBHOOK_ALLOW_PRIVATE=true) and have a WEBHOOK_SECRET_KEY.
func (b *bench) signupHotWebhooks(ctx context.Context) error {
	hooks, closeHooks, err := b.subscribeHooks(ctx, ScenarioSignupHotWebhooks, 2)
	if err != nil {
		return err
	}
	defer closeHooks()
	var (
		drained  bool
		drainErr error
		took     time.Duration
	)
	settle := func(ctx context.Context) error {
		stopped := time.Now()
		drained, drainErr = b.waitDeliveriesDrained(ctx)
		took = time.Since(stopped)
		return drainErr
	}
	if err := b.driveSignupHot(ctx, ScenarioSignupHotWebhooks, 64, settle); err != nil {
		return err
	}
	if drainErr != nil {
		return drainErr
	}
	received, dups := hooks.counts()
	if drained {
		b.report.Checks[CheckWebhookDrainSeconds] = round(took.Seconds(), 2)
	}
	b.report.Checks[CheckWebhookReceived] = int64(received)
	b.report.Checks[CheckWebhookDuplicates] = dups
	fmt.Fprintf(b.log, "%-16s deliveries drained: %v after %s; %d deliveries received, %d duplicates\n",
		ScenarioSignupHotWebhooks, drained, took.Round(10*time.Millisecond), received, dups)
	return b.resetHot(ctx)
}

// createWebhook registers a webhook for every event to url.
func (b *bench) createWebhook(ctx context.Context, url string) (string, error) {
	w, err := b.api.WithToken(b.admin).CreateWebhook(ctx, client.NewWebhook{URL: url, Events: []string{"*"}})
	if err != nil {
		return "", fmt.Errorf("loadtest: create a webhook (the service needs WEBHOOK_ALLOW_PRIVATE=true and a WEBHOOK_SECRET_KEY): %w", err)
	}
	return w.ID, nil
}

// pendingDeliveriesSQL counts the deliveries of the hot activity's events
// not yet made: the events after the enabled webhooks' cursors (a missing
// cursor is at 0) and the pending retries.
const pendingDeliveriesSQL = `
	SELECT (SELECT count(*) FROM webhook_retry t JOIN webhook w ON w.id = t.webhook_id AND w.disabled_at IS NULL
			WHERE t.activity_id = $1 AND t.state = 'pending')
		+ (SELECT coalesce(sum(s.last_seq - coalesce(c.seq, 0)), 0) FROM webhook w JOIN activity_state s ON s.activity_id = $1
			LEFT JOIN webhook_cursor c ON c.webhook_id = w.id AND c.activity_id = s.activity_id
			WHERE w.disabled_at IS NULL AND (w.activity_id IS NULL OR w.activity_id = $1))`

// waitDeliveriesDrained polls the bench database until no delivery is
// pending, for at most webhookDrainLimit.
func (b *bench) waitDeliveriesDrained(ctx context.Context) (bool, error) {
	deadline := time.Now().Add(webhookDrainLimit)
	for time.Now().Before(deadline) {
		var pending int64
		if err := b.db.QueryRow(ctx, pendingDeliveriesSQL, b.seed.HotID).Scan(&pending); err != nil {
			return false, fatalError{fmt.Errorf("loadtest: count pending webhook deliveries: %w", err)}
		}
		if pending == 0 {
			return true, nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return false, err
		}
	}
	return false, nil
}

// dropWebhooks deletes the scenario's webhooks with their delivery
// records.
func (b *bench) dropWebhooks(ctx context.Context, scenario string, ids []string) {
	var errs []error
	for _, id := range ids {
		errs = append(errs, b.api.WithToken(b.admin).DeleteWebhook(ctx, id))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(b.log, "%-16s cleanup: %v\n", scenario, err)
	}
}
