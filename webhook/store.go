package webhook

import (
	"context"
	"time"
)

// Store is what webhooks need from storage. Deliveries are read from the
// event log: the change transaction writes nothing for webhooks. Each
// enabled webhook reads each activity's events in seq order through a
// cursor, in leased batches; an event whose first attempt fails joins the
// retry set, and the cursor goes on.
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

	// ClaimDeliveries claims work for the caller, skipping what another
	// worker holds: for each enabled webhook, the next batch of each
	// activity's events after its cursor (only the activities named by
	// Claim.Activities when it is not nil), and, when Claim.Activities is
	// nil, its due retries: at most its free slots (Claim.Slots less
	// Claim.Busy) of each. A batch is
	// leased for Claim.Lease: nobody else claims it meanwhile, and if it is
	// not recorded by then it is claimed again. A batch with no event the
	// webhook receives is passed at once. A retry's claim counts its
	// attempt and leases it likewise.
	ClaimDeliveries(ctx context.Context, c Claim) ([]Job, error)
	// RecordAttempts records the results of attempts. Those of a batch
	// come together, all of them: the batch's cursor advances past it and
	// its attempts are recorded only while the batch is still leased to
	// the caller (a late result of a lease that another claim took over
	// changes nothing); its events that were not delivered join the retry
	// set. A retry's result is recorded only while the retry is still
	// claimed for that attempt. An OutcomeGone disables the webhook and
	// fails its pending retries; an OutcomeUnsent retry is given back.
	RecordAttempts(ctx context.Context, attempts []Attempt) error
	// Backlog counts the enabled webhooks and their pending deliveries.
	Backlog(ctx context.Context) (Backlog, error)
	// PurgeDeliveries deletes the attempts and ended retries recorded
	// before t, and returns how many retries it deleted.
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
	// Activities limits the claim to these activities' batches (public
	// ids), what local commits recorded; nil: every activity's batches and
	// the due retries.
	Activities []string
}

// Ref names one event's delivery to one webhook in the store; opaque to
// the dispatcher.
type Ref struct {
	WebhookID, ActivityID, Seq int64
}

// Batch is a leased stretch of one activity's events for one webhook:
// those after From up to To. Its Jobs are its events the webhook
// receives; opaque to the dispatcher but for Jobs and Activity.
type Batch struct {
	WebhookID, ActivityID int64
	From, To, Fence       int64
	Jobs                  int
	// Activity is the activity's public id.
	Activity string
}

// Job is a claimed delivery: one attempt to make.
type Job struct {
	Ref Ref
	// Batch is the batch of a first attempt; nil for a retry.
	Batch *Batch
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
	// not be within its lease); its attempt is not counted and it is due
	// again at once (from the retry set).
	OutcomeUnsent Outcome = "unsent"
)

// Attempt is the result of one attempt.
type Attempt struct {
	Ref Ref
	// Batch is the job's Batch.
	Batch   *Batch
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
	// EventAt is when the event was recorded (the job's CreatedAt).
	EventAt time.Time
}

// Backlog is the deliveries not yet made: the events after the cursors
// and the pending retries.
type Backlog struct {
	// Webhooks counts the enabled webhooks.
	Webhooks int
	Pending  int64
	// Oldest is when the oldest pending delivery's event was recorded;
	// zero when nothing is pending.
	Oldest time.Time
}
