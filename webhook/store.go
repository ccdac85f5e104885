package webhook

import (
	"context"
	"time"
)

// Store is what webhooks need from storage. The store also keeps the
// outbox: in the change transaction of every seat change, for each event it
// records, it inserts one pending delivery per enabled webhook that
// matches the event (its type, and its activity when the webhook names
// one), and the event's Payload once.
type Store interface {
	// CreateWebhook stores a webhook with its sealed secret; not_found
	// when its activity does not exist.
	CreateWebhook(ctx context.Context, w Webhook, sealedSecret []byte) (Webhook, error)
	// Webhooks returns every webhook, oldest first.
	Webhooks(ctx context.Context) ([]Webhook, error)
	// Webhook returns one webhook, or not_found.
	Webhook(ctx context.Context, id string) (Webhook, error)
	// DeleteWebhook deletes a webhook with its deliveries and attempts,
	// or returns not_found.
	DeleteWebhook(ctx context.Context, id string) error
	// StoredSecrets returns every webhook's secret as it is stored.
	StoredSecrets(ctx context.Context) ([]StoredSecret, error)
	// ReplaceSecret stores a webhook's secret in another form, if it is
	// still stored as old; done reports whether it was.
	ReplaceSecret(ctx context.Context, webhookID string, old, replacement []byte) (done bool, err error)
	// Deliveries returns up to limit of a webhook's deliveries, newest
	// first.
	Deliveries(ctx context.Context, webhookID string, limit int) ([]Delivery, error)
	// DeliveryAttempts returns the recorded attempts of the delivery of
	// event eventID (activityID's event seq) to a webhook, in attempt
	// order, or NoDelivery when there is no such delivery.
	DeliveryAttempts(ctx context.Context, webhookID, eventID, activityID string, seq int64) ([]DeliveryAttempt, error)

	// ClaimDeliveries claims due pending deliveries of enabled webhooks,
	// skipping those another worker holds: for each webhook at most its
	// free slots (Claim.Slots less what Claim.Busy says is in flight). A
	// claim counts the attempt and leases the delivery to the caller for
	// Claim.Lease: nobody else claims it meanwhile, and if no result is
	// recorded by then it is due again.
	ClaimDeliveries(ctx context.Context, c Claim) ([]Job, error)
	// RecordAttempts records the results of attempts, each only while its
	// delivery is still claimed for that attempt (a late result of a lease
	// that another claim took over changes nothing). An OutcomeGone
	// disables the webhook and fails its pending deliveries; an
	// OutcomeUnsent gives the claim back.
	RecordAttempts(ctx context.Context, attempts []Attempt) error
	// Backlog counts the enabled webhooks and their pending deliveries.
	Backlog(ctx context.Context) (Backlog, error)
	// PurgeDeliveries deletes the messages, deliveries and attempts
	// recorded before t, and returns how many deliveries it deleted.
	PurgeDeliveries(ctx context.Context, before time.Time) (int64, error)
}

// StoredSecret is a webhook's secret as it is stored.
type StoredSecret struct {
	WebhookID string
	Stored    []byte
}

// Claim asks for due deliveries.
type Claim struct {
	// Lease is how long the claimed deliveries are the caller's.
	Lease time.Duration
	// Slots is the most deliveries of one webhook the caller holds at
	// once (in flight or waiting to be sent).
	Slots int
	// Busy counts, by webhook id, the deliveries the caller holds.
	Busy map[string]int
}

// Ref names a delivery in the store; opaque to the dispatcher.
type Ref struct {
	WebhookID, DeliveryID int64
}

// Job is a claimed delivery: one attempt to make.
type Job struct {
	Ref Ref
	// Attempt is this attempt's number, 1 for the first.
	Attempt      int
	WebhookID    string
	URL          string
	SealedSecret []byte
	EventID      string
	Body         []byte
	// CreatedAt is when the event was recorded: retries end 24 h later.
	CreatedAt time.Time
}

// Outcome is what an attempt leads to.
type Outcome string

// Attempt outcomes.
const (
	// OutcomeDelivered: the receiver answered 2xx.
	OutcomeDelivered Outcome = "delivered"
	// OutcomeRetry: no 2xx; the delivery is tried again after RetryIn.
	OutcomeRetry Outcome = "retried"
	// OutcomeFailed: no 2xx and the retries are over.
	OutcomeFailed Outcome = "failed"
	// OutcomeGone: the receiver answered 410 Gone; the webhook is
	// disabled.
	OutcomeGone Outcome = "disabled"
	// OutcomeUnsent: the claimed delivery was not sent after all (it could
	// not be within its lease); its lease ends and its attempt is not
	// counted.
	OutcomeUnsent Outcome = "unsent"
)

// Attempt is the result of one attempt.
type Attempt struct {
	Ref     Ref
	Attempt int
	// At is when the attempt started, Duration how long it took.
	At       time.Time
	Duration time.Duration
	// StatusCode is the receiver's answer; 0 when there was none, and
	// Error says why.
	StatusCode int
	Error      string
	Outcome    Outcome
	// RetryIn is the delay before the next attempt, with OutcomeRetry.
	RetryIn time.Duration
}

// Backlog is the outbox's pending deliveries.
type Backlog struct {
	// Webhooks counts the enabled webhooks.
	Webhooks int
	Pending  int64
	// Oldest is when the oldest pending delivery's event was recorded;
	// zero when nothing is pending.
	Oldest time.Time
}
