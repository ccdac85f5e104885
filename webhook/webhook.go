// Package webhook delivers every registration event to the URLs that admins
// register, signed as the Standard Webhooks specification says, from the
// event log: the change transaction writes nothing for webhooks; a
// Dispatcher on every instance claims batches of each webhook's events
// after its cursor (the store keeps them), sends them outside any
// transaction and records each attempt, and retries the events not
// delivered from a retry set, with growing delays.
//
// One responsibility per file: webhook.go the model and its validation,
// secret.go the signing secrets and their sealing at rest, sign.go the
// signature, guard.go the HTTP client that reaches only public addresses,
// payload.go what is sent, service.go the admin operations, store.go what
// it needs from storage. The delivery: dispatcher.go the Dispatcher and its
// run, wake.go its wake-ups and activation, claim.go the claiming of
// deliveries and the batches held, slots.go the slots per webhook and the
// handing of results to the recorder, attempt.go the sending of one
// delivery and the recording of results, schedule.go the retry schedule.
package webhook

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// AllEvents is the one element of Events that subscribes to every event type.
const AllEvents = "*"

// Limits of a webhook.
const (
	MaxURLLen           = 2048
	DefaultDeliveryList = 100
	MaxDeliveryList     = 500
)

// Webhook is a URL that receives the registration events it subscribes to.
type Webhook struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Events are event types, or ["*"] for all of them.
	Events []string `json:"events"`
	// ActivityID limits the webhook to one activity's events; nil: all.
	ActivityID *string   `json:"activity_id"`
	CreatedAt  time.Time `json:"created_at"`
	// DisabledAt is when a receiver's 410 Gone disabled the webhook; nil
	// while it is enabled. A disabled webhook receives nothing more.
	DisabledAt *time.Time `json:"disabled_at"`
}

// Created is a new webhook with its signing secret, which is shown only
// once, in the answer to its creation.
type Created struct {
	Webhook
	Secret string `json:"secret"`
}

// NewWebhook is what an admin sends to register a webhook.
type NewWebhook struct {
	URL        string
	Events     []string
	ActivityID *string
}

// State is where a delivery stands.
type State string

// Delivery states.
const (
	Pending   State = "pending"
	Delivered State = "delivered"
	Failed    State = "failed"
)

// Delivery is one event's delivery to one webhook, as the admin API shows
// it.
type Delivery struct {
	EventID  string `json:"event_id"`
	Attempts int    `json:"attempts"`
	// LastStatusCode is the receiver's status on the last recorded
	// attempt; nil before any answer. LastError says why the last attempt
	// got no answer (timeout, refused, …).
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
	DeliveredAt    *time.Time `json:"delivered_at"`
	// NextAttemptAt is when the pending delivery is tried (again); nil
	// once it is delivered or failed.
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	State         State      `json:"state"`
}

// DeliveryAttempt is one attempt of a delivery, as the admin API shows it.
type DeliveryAttempt struct {
	// Attempt numbers the delivery's attempts from 1.
	Attempt int `json:"attempt"`
	// At is when the attempt started.
	At time.Time `json:"at"`
	// StatusCode is the receiver's answer; nil when there was none, and
	// then Error says why (timeout, refused, …).
	StatusCode *int    `json:"status_code"`
	Error      *string `json:"error"`
	// DurationMS is how long the attempt took, in milliseconds (to the
	// microsecond): from its start to the receiver's whole answer, or to
	// the error.
	DurationMS float64 `json:"duration_ms"`
}

// NotFound returns the not_found error of a webhook id that names nothing.
func NotFound(id string) error {
	return capacityd.Errorf(capacityd.ENotFound, "webhook %s not found", id)
}

// NoDelivery returns the not_found error of an event that was not queued
// for a webhook (or whose delivery records were purged).
func NoDelivery(webhookID, eventID string) error {
	return capacityd.Errorf(capacityd.ENotFound, "webhook %s has no delivery of event %s", webhookID, eventID)
}

// eventRef is where an event id points: an activity's event seq (see
// registration.EventID, "ev_" + the activity id without its "a_" + "_" +
// seq). ok is false when id does not have that form.
func eventRef(id string) (activityID string, seq int64, ok bool) {
	rest, found := strings.CutPrefix(id, "ev_")
	i := strings.LastIndexByte(rest, '_')
	if !found || i < 1 {
		return "", 0, false
	}
	seq, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || seq < 1 || registration.EventID("a_"+rest[:i], seq) != id {
		return "", 0, false
	}
	return "a_" + rest[:i], seq, true
}

// validate checks everything but the URL's addresses (see Guard), and
// normalises Events: duplicates dropped, order kept.
func (n *NewWebhook) validate() (*url.URL, error) {
	u, err := parseURL(n.URL)
	if err != nil {
		return nil, err
	}
	events, err := normaliseEvents(n.Events)
	if err != nil {
		return nil, err
	}
	n.Events = events
	if n.ActivityID != nil && *n.ActivityID == "" {
		return nil, capacityd.Errorf(capacityd.EInvalid, `field "activity_id" must be an activity id or null`)
	}
	return u, nil
}

// parseURL accepts an absolute http or https URL with a host.
func parseURL(raw string) (*url.URL, error) {
	if raw == "" || len(raw) > MaxURLLen {
		return nil, capacityd.Errorf(capacityd.EInvalid, `field "url" must be an http or https URL of 1 to %d characters`, MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" {
		return nil, capacityd.Errorf(capacityd.EInvalid, `field "url" must be an absolute http or https URL`)
	}
	if u.User != nil {
		return nil, capacityd.Errorf(capacityd.EInvalid,
			`field "url" must not carry credentials (user:password@host): every admin would see them; receivers authenticate deliveries by their webhook-signature header instead`)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, capacityd.Errorf(capacityd.EInvalid, `field "url" has port %s: a port is 1 to 65535`, safe(p))
		}
	}
	return u, nil
}

// RedactURL returns raw with the user name and password of its userinfo,
// if any, replaced by "redacted": a webhook URL is shown to every admin,
// and credentials in it must not be. New webhooks cannot carry userinfo
// (see parseURL); this keeps any stored before that rule from showing
// theirs. A URL that does not parse is returned as "redacted" whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "redacted"
	}
	if u.User == nil {
		return raw
	}
	u.User = url.User("redacted")
	return u.String()
}

// redacted returns w with its URL redacted (see RedactURL).
func (w Webhook) redacted() Webhook {
	w.URL = RedactURL(w.URL)
	return w
}

// Subscribes reports whether a webhook that subscribes to events (event
// types, or AllEvents alone) receives an event of type t. Block events go
// to no webhook. (The store's queries test the same in SQL.)
func Subscribes(events []string, t registration.EventType) bool {
	if t.IsBlockEvent() {
		return false
	}
	return slices.Equal(events, []string{AllEvents}) || slices.Contains(events, string(t))
}

// normaliseEvents accepts ["*"] or a list of event types.
func normaliseEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, capacityd.Errorf(capacityd.EInvalid, `field "events" must list event types, or be ["*"] for all`)
	}
	if slices.Contains(events, AllEvents) {
		if len(events) != 1 {
			return nil, capacityd.Errorf(capacityd.EInvalid, `field "events": "*" stands alone (it means every type)`)
		}
		return events, nil
	}
	out := make([]string, 0, len(events))
	for _, e := range events {
		if !slices.Contains(registration.EventTypes, registration.EventType(e)) {
			return nil, capacityd.Errorf(capacityd.EInvalid, "field \"events\": unknown event type %q", safe(e))
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// safe shortens a client's value for an error message.
func safe(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
