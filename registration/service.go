package registration

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

// Defaults of the change transactions (ChangeConfig).
const (
	DefaultMaxBatch        = 1000
	DefaultMaxActivities   = 256
	DefaultMaxTransactions = 1
	DefaultGatherAt        = 64
	DefaultGatherFor       = 50 * time.Millisecond
	// DefaultChangeTimeout bounds one change transaction (Config.ChangeTimeout).
	DefaultChangeTimeout = 10 * time.Second
)

// ChangeConfig sizes the change transactions: the transactions in which
// the queued changes (signups, cancellations, …) of many activities are
// applied together at the authority. A zero MaxBatch, MaxActivities,
// MaxTransactions or GatherAt takes its default; a zero GatherFor never
// gathers. DefaultChangeConfig returns the defaults.
type ChangeConfig struct {
	// MaxBatch caps the commands of one change transaction (default 1000),
	// MaxActivities the activities it serves (default 256), and
	// MaxTransactions the change transactions in flight at once (default
	// 1: the commands that queue while one runs all go into the next, so
	// that commands of many activities share transactions, and their
	// commits, as a crowd on one activity does).
	MaxBatch        int
	MaxActivities   int
	MaxTransactions int
	// GatherAt and GatherFor make a crowded activity gather its next
	// commands: after a change transaction that took at least GatherAt
	// (default 64) of its commands, its next one waits until as many more
	// have queued, or for GatherFor (DefaultGatherFor in
	// DefaultChangeConfig; zero: never), whichever comes first. A crowd
	// then commits in fewer, larger transactions instead of batches that
	// stay near half the crowd (see groupcommit.Options).
	GatherAt  int
	GatherFor time.Duration
}

// DefaultChangeConfig returns the default sizes of change transactions.
func DefaultChangeConfig() ChangeConfig {
	return ChangeConfig{
		MaxBatch: DefaultMaxBatch, MaxActivities: DefaultMaxActivities, MaxTransactions: DefaultMaxTransactions,
		GatherAt: DefaultGatherAt, GatherFor: DefaultGatherFor,
	}
}

// Config configures a Service.
type Config struct {
	Store Store
	// Gate is the display tier's gate; nil: none, the authority alone
	// decides.
	Gate Gate
	// Observers react to every commit, in this order.
	Observers []Observer
	// Changes wakes the event feed's long polls; nil: they re-read every
	// second.
	Changes Changes
	// Now is the clock of holds and expiry; default time.Now. Tests inject
	// a fake one.
	Now func() time.Time
	// Change sizes the change transactions.
	Change ChangeConfig
	// ChangeTimeout bounds one change transaction, from the moment it
	// takes its commands to their outcome (default 10s). A command whose
	// request ends while it still waits in its activity's queue is
	// withdrawn and answered unavailable, nothing written; one already
	// taken waits for its outcome. Set it to the request deadline so that
	// requests answer near it.
	ChangeTimeout time.Duration
	Logger        *slog.Logger
	Registerer    prometheus.Registerer
}

// Service is the signup domain's entry point: it puts every change of an
// activity on the activity's queue, where it is applied with the other
// queued changes in one transaction at the authority, and tells the
// observers what each transaction committed.
type Service struct {
	store     Store
	gate      Gate
	observers []Observer
	changes   Changes
	now       func() time.Time
	log       *slog.Logger
	queue     *groupcommit.Group[string, Command, Outcome]
	// releases is the release commands' own lane (see Service.release).
	releases *groupcommit.Group[string, Command, Outcome]
	checks   *groupcommit.Group[string, string, fullVerdict]
	lookups  *groupcommit.Group[struct{}, string, lookup]
	metrics  *metrics

	idMu    sync.Mutex
	entropy *ulid.MonotonicEntropy
	// lastChange is when a change transaction last began (unix
	// nanoseconds; see ChangedWithin): once a transaction, not once a
	// command.
	lastChange atomic.Int64
}

// NewService returns a Service.
func NewService(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{
		store:     cfg.Store,
		gate:      cfg.Gate,
		observers: cfg.Observers,
		changes:   cfg.Changes,
		now:       cfg.Now,
		log:       cmp.Or(cfg.Logger, slog.Default()),
		metrics:   newMetrics(cfg.Registerer),
		entropy:   ulid.Monotonic(rand.Reader, 0),
	}
	change := cfg.Change
	maxBatch := cmp.Or(change.MaxBatch, DefaultMaxBatch)
	s.queue = groupcommit.New(s.apply, groupcommit.Options{
		MaxBatch:     maxBatch,
		MaxKeys:      cmp.Or(change.MaxActivities, DefaultMaxActivities),
		MaxFlushes:   cmp.Or(change.MaxTransactions, DefaultMaxTransactions),
		FlushTimeout: cmp.Or(cfg.ChangeTimeout, DefaultChangeTimeout),
		GatherAt:     cmp.Or(change.GatherAt, DefaultGatherAt),
		GatherFor:    max(change.GatherFor, 0),
		GatherEnded:  s.metrics.gatherEnded,
	})
	// The releases' lane: one transaction at a time of its own, beside
	// the change queue's, so that a release of many seats does not stop
	// the signups of other activities while it commits.
	s.releases = groupcommit.New(s.apply, groupcommit.Options{
		MaxBatch:     maxBatch,
		MaxKeys:      cmp.Or(change.MaxActivities, DefaultMaxActivities),
		MaxFlushes:   1,
		FlushTimeout: cmp.Or(cfg.ChangeTimeout, DefaultChangeTimeout),
	})
	s.checks = groupcommit.New(s.checkFull, groupcommit.Options{
		MaxBatch: maxBatch, MaxKeys: DefaultMaxActivities, MaxFlushes: 2,
	})
	// Registrations are looked up by id in one statement for the lookups
	// that arrive together (one key: one statement in flight), since a
	// cancellation or status change must read its registration to find
	// the activity whose queue it goes to.
	s.lookups = groupcommit.New(s.lookupBatches, groupcommit.Options{MaxBatch: maxBatch})
	return s
}

// ChangedWithin reports whether a transaction of seat changes (signups,
// cancellations, releases, …) began on this instance within d. Work that
// yields the processor to seat changes asks it: a busy door
// (checkin.Config.SeatChanges).
func (s *Service) ChangedWithin(d time.Duration) bool {
	return time.Now().UnixNano()-s.lastChange.Load() < int64(d)
}

// Close applies the changes queued so far and refuses new ones.
func (s *Service) Close(ctx context.Context) error {
	return errors.Join(s.queue.Close(ctx), s.releases.Close(ctx), s.checks.Close(ctx), s.lookups.Close(ctx))
}

func (s *Service) newID(prefix string) string {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	return prefix + ulid.MustNew(ulid.Timestamp(time.Now()), s.entropy).String()
}

// CreateActivity validates and stores a new activity.
func (s *Service) CreateActivity(ctx context.Context, in NewActivity) (Activity, error) {
	if err := in.Validate(); err != nil {
		return Activity{}, err
	}
	return s.store.CreateActivity(ctx, s.newID("a_"), in)
}

// GetActivity returns an activity with its authoritative seat numbers.
func (s *Service) GetActivity(ctx context.Context, id string) (Activity, error) {
	return s.store.GetActivity(ctx, id)
}

// ListActivities returns one page of the activities, newest first.
func (s *Service) ListActivities(ctx context.Context, before string, limit int) (ActivityPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return ActivityPage{}, err
	}
	items, err := s.store.ListActivities(ctx, before, limit+1)
	if err != nil {
		return ActivityPage{}, err
	}
	var p ActivityPage
	p.Items, p.NextCursor = cutPage(items, limit, func(a Activity) string { return a.ID })
	return p, nil
}

// UpdateActivity changes an activity on its queue, like every seat change:
// lowering the capacity below taken evicts nobody, raising it admits the
// first in line at once.
func (s *Service) UpdateActivity(ctx context.Context, id string, p ActivityPatch, c Caller) (Activity, error) {
	if err := p.Validate(); err != nil {
		return Activity{}, err
	}
	if err := validateCaller(c); err != nil {
		return Activity{}, err
	}
	out, err := s.submit(ctx, id, ActivityCommand{Origin: c.origin(), Patch: p})
	if err != nil {
		return Activity{}, err
	}
	if out.Err != nil {
		return Activity{}, out.Err
	}
	a := *out.Activity
	if a.Policy == PolicyStrict && a.Waiting > 0 {
		// Whether the change left the line's head where no capacity holds
		// it: the admin who made it is told in its answer.
		if now, err := s.store.GetActivity(ctx, id); err == nil {
			a.LineBlockedBy = now.LineBlockedBy
		}
	}
	return a, nil
}
