package httpapi

import (
	"context"

	"github.com/physiciansnet/capacityd/note"
	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/stream"
	"github.com/physiciansnet/capacityd/webhook"
)

// The edge declares what it asks of each service, and nothing more: the
// wiring passes the real services (registration.Service, note.Service,
// webhook.Service, onsale.Queue, stream.Hub, settingscache.Cache), and the
// handler tests pass fakes.

// ActivityService is what the edge asks of activities.
type ActivityService interface {
	CreateActivity(ctx context.Context, in registration.NewActivity) (registration.Activity, error)
	GetActivity(ctx context.Context, id string) (registration.Activity, error)
	ListActivities(ctx context.Context, before string, limit int) (registration.ActivityPage, error)
	UpdateActivity(ctx context.Context, id string, p registration.ActivityPatch, c registration.Caller) (registration.Activity, error)
	ActivityEvents(ctx context.Context, f registration.EventFilter) (registration.EventPage, error)
}

// PoolService is what the edge asks of pools.
type PoolService interface {
	CreatePool(ctx context.Context, in registration.NewPool) (registration.Pool, error)
	GetPool(ctx context.Context, id string) (registration.Pool, error)
	ListPools(ctx context.Context, before string, limit int) (registration.PoolPage, error)
	UpdatePool(ctx context.Context, id string, p registration.PoolPatch, c registration.Caller) (registration.Pool, error)
}

// SeriesService is what the edge asks of series.
type SeriesService interface {
	CreateSeries(ctx context.Context, in registration.NewSeries) (registration.Series, error)
	GetSeries(ctx context.Context, id string) (registration.Series, error)
	ListSeries(ctx context.Context, before string, limit int) (registration.SeriesPage, error)
	UpdateSeries(ctx context.Context, id string, p registration.SeriesPatch) (registration.Series, error)
}

// BlockService is what the edge asks of blocks.
type BlockService interface {
	CreateBlock(ctx context.Context, activityID string, in registration.NewBlock, c registration.Caller) (registration.Block, error)
	ListBlocks(ctx context.Context, activityID string) ([]registration.Block, error)
	DeleteBlock(ctx context.Context, id string, c registration.Caller) error
}

// RegistrationService is what the edge asks of registrations: signing up, reading and
// changing them.
type RegistrationService interface {
	Signup(ctx context.Context, in registration.SignupInput) (reg registration.Registration, replayed bool, err error)
	GetRegistration(ctx context.Context, id string, c registration.Caller) (registration.Registration, error)
	ListRegistrations(ctx context.Context, f registration.ListFilter) (registration.Page, error)
	UserRegistrations(ctx context.Context, f registration.UserFilter) (registration.Page, error)
	ExportRegistrations(ctx context.Context, activityID string, status registration.Status, emit func(registration.Registration) error) error
	RegistrationEvents(ctx context.Context, id string, c registration.Caller) ([]registration.Event, error)
	Cancel(ctx context.Context, id string, c registration.Caller) (registration.Registration, error)
	Confirm(ctx context.Context, id string, c registration.Caller) (registration.Registration, error)
	ReduceSeats(ctx context.Context, id string, seats int, c registration.Caller) (registration.Registration, error)
	SetStatus(ctx context.Context, id string, to registration.Status, c registration.Caller) (registration.Registration, error)
}

// Registrations is everything the edge asks of the registration service.
type Registrations interface {
	ActivityService
	PoolService
	SeriesService
	BlockService
	RegistrationService
}

// NoteService is what the edge asks of the note counters.
type NoteService interface {
	Get(ctx context.Context, noteID string) (note.Stats, error)
	Increment(ctx context.Context, noteID string, kind note.Kind) (note.Stats, error)
	Register(ctx context.Context, noteID string) (st note.Stats, created bool, err error)
}

// WebhookService is what the edge asks of webhook registration.
type WebhookService interface {
	Create(ctx context.Context, in webhook.NewWebhook) (webhook.Created, error)
	List(ctx context.Context) ([]webhook.Webhook, error)
	Get(ctx context.Context, id string) (webhook.Webhook, error)
	Delete(ctx context.Context, id string) error
	Deliveries(ctx context.Context, id string, limit int) ([]webhook.Delivery, error)
	Attempts(ctx context.Context, id, eventID string) ([]webhook.DeliveryAttempt, error)
}

// QueueService is what the edge asks of the admission queues.
type QueueService interface {
	Join(ctx context.Context, activityID, userID string) (onsale.Ticket, error)
	Me(ctx context.Context, activityID, userID string) (onsale.Ticket, error)
	// Forget drops the user's place from this instance's memory, so that
	// its next read asks the authority.
	Forget(activityID, userID string)
}

// SeatStreams is what the edge asks of the seat stream hub.
type SeatStreams interface {
	Subscribe(ctx context.Context, activityID string) (*stream.Subscriber, error)
}

// SettingsCache is what the edge asks of a cache of settings (of
// activities or pools) for the public reads.
type SettingsCache[T any] interface {
	// Get returns id's settings, calling beforeLookup before it reads the
	// database (an error of beforeLookup is returned as is).
	Get(ctx context.Context, id string, beforeLookup func() error) (T, error)
	// Created adds the settings of something just created.
	Created(v T)
	// Forget drops ids, so that their next read loads them.
	Forget(ids ...string)
}
