package webhook

import (
	"context"

	"github.com/oklog/ulid/v2"

	"github.com/physiciansnet/capacityd"
)

// Service is the admin side of webhooks: register, read and delete them,
// and read their deliveries.
type Service struct {
	store      Store
	guard      *Guard
	sealer     *Sealer
	dispatcher *Dispatcher
}

// NewService returns a Service. guard checks the URLs of new webhooks;
// sealer protects their secrets at rest; dispatcher, when not nil, is told
// of each new webhook.
func NewService(store Store, guard *Guard, sealer *Sealer, dispatcher *Dispatcher) *Service {
	return &Service{store: store, guard: guard, sealer: sealer, dispatcher: dispatcher}
}

// Create validates and stores a new webhook and returns it with its
// secret, which is never shown again.
func (s *Service) Create(ctx context.Context, in NewWebhook) (Created, error) {
	u, err := in.validate()
	if err != nil {
		return Created{}, err
	}
	if err := s.guard.CheckURL(ctx, u); err != nil {
		return Created{}, err
	}
	id := "wh_" + ulid.Make().String()
	key, secret, err := newSecret()
	if err != nil {
		return Created{}, err
	}
	sealed, err := s.sealer.Seal(id, key)
	if err != nil {
		return Created{}, err
	}
	w, err := s.store.CreateWebhook(ctx, Webhook{ID: id, URL: in.URL, Events: in.Events, ActivityID: in.ActivityID}, sealed)
	if capacityd.IsCode(err, capacityd.ENotFound) {
		// As everywhere, an activity id that names nothing is not_found.
		return Created{}, capacityd.Errorf(capacityd.ENotFound, "field \"activity_id\": activity %s not found", safe(*in.ActivityID))
	}
	if err != nil {
		return Created{}, err
	}
	if s.dispatcher != nil {
		s.dispatcher.Activate()
	}
	return Created{Webhook: w, Secret: secret}, nil
}

// SealClearSecrets seals, when the Sealer has a key, the secrets that a
// server without one stored in clear, and returns how many it sealed. A
// secret another instance sealed meanwhile is left as that one wrote it.
func (s *Service) SealClearSecrets(ctx context.Context) (int, error) {
	if !s.sealer.Keyed() {
		return 0, nil
	}
	stored, err := s.store.StoredSecrets(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range stored {
		if !inClear(c.Stored) {
			continue
		}
		key, err := s.sealer.Open(c.WebhookID, c.Stored)
		if err != nil {
			return n, err
		}
		sealed, err := s.sealer.Seal(c.WebhookID, key)
		if err != nil {
			return n, err
		}
		done, err := s.store.ReplaceSecret(ctx, c.WebhookID, c.Stored, sealed)
		if err != nil {
			return n, err
		}
		if done {
			n++
		}
	}
	return n, nil
}

// List returns every webhook, oldest first, without secrets and with
// any credentials in their URLs redacted.
func (s *Service) List(ctx context.Context) ([]Webhook, error) {
	ws, err := s.store.Webhooks(ctx)
	if ws == nil {
		ws = []Webhook{}
	}
	for i := range ws {
		ws[i] = ws[i].redacted()
	}
	return ws, err
}

// Get returns a webhook without its secret, and with any credentials in
// its URL redacted.
func (s *Service) Get(ctx context.Context, id string) (Webhook, error) {
	w, err := s.store.Webhook(ctx, id)
	return w.redacted(), err
}

// Delete deletes a webhook: nothing more is delivered to it.
func (s *Service) Delete(ctx context.Context, id string) error {
	return s.store.DeleteWebhook(ctx, id)
}

// Deliveries returns up to limit (default 100, at most 500) of a
// webhook's most recent deliveries, newest first.
func (s *Service) Deliveries(ctx context.Context, id string, limit int) ([]Delivery, error) {
	if limit == 0 {
		limit = DefaultDeliveryList
	}
	if limit < 1 || limit > MaxDeliveryList {
		return nil, capacityd.Errorf(capacityd.EInvalid, "limit must be between 1 and %d", MaxDeliveryList)
	}
	if _, err := s.store.Webhook(ctx, id); err != nil {
		return nil, err
	}
	ds, err := s.store.Deliveries(ctx, id, limit)
	if ds == nil {
		ds = []Delivery{}
	}
	return ds, err
}

// Attempts returns every recorded attempt of one event's delivery to a
// webhook, in attempt order: empty while its first attempt is under way or
// not yet made. not_found when the webhook does not exist, or when the
// event (whatever its form) has no delivery to it.
func (s *Service) Attempts(ctx context.Context, id, eventID string) ([]DeliveryAttempt, error) {
	if _, err := s.store.Webhook(ctx, id); err != nil {
		return nil, err
	}
	activityID, seq, ok := eventRef(eventID)
	if !ok {
		return nil, NoDelivery(id, safe(eventID))
	}
	as, err := s.store.DeliveryAttempts(ctx, id, eventID, activityID, seq)
	if as == nil && err == nil {
		as = []DeliveryAttempt{}
	}
	return as, err
}
