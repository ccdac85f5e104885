package registration

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

// Caller is who makes a request.
type Caller struct {
	UserID string
	Admin  bool
}

// Config configures a Service.
type Config struct {
	Store Store
	// Seats is the display tier.
	Seats *capacity.Counter
	// Now is the clock; default time.Now. Tests inject a fake one.
	Now func() time.Time
	// MaxBatch caps the signups of one admission transaction. Default 1000.
	MaxBatch   int
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Service admits, cancels and moves registrations, keeping the display tier
// in step with the authority.
type Service struct {
	store   Store
	seats   *capacity.Counter
	now     func() time.Time
	log     *slog.Logger
	admit   *groupcommit.Group[string, AdmissionRequest, AdmissionResult]
	metrics *metrics

	idMu    sync.Mutex
	entropy *ulid.MonotonicEntropy
}

// NewService returns a Service.
func NewService(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Service{
		store:   cfg.Store,
		seats:   cfg.Seats,
		now:     cfg.Now,
		log:     cfg.Logger,
		metrics: newMetrics(cfg.Registerer),
		entropy: ulid.Monotonic(rand.Reader, 0),
	}
	s.admit = groupcommit.New(s.admitBatch, groupcommit.Options{MaxBatch: cfg.MaxBatch, FlushTimeout: 10 * time.Second})
	return s
}

// Close finishes the admission batches in flight and refuses new signups.
func (s *Service) Close(ctx context.Context) error { return s.admit.Close(ctx) }

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

// UpdateActivity changes an activity. A capacity change is made under the
// admission lock, then written to the display counter. Lowering capacity
// below taken evicts nobody.
func (s *Service) UpdateActivity(ctx context.Context, id string, p ActivityPatch) (Activity, error) {
	if err := p.Validate(); err != nil {
		return Activity{}, err
	}
	a, err := s.store.UpdateActivity(ctx, id, p)
	if err != nil {
		return Activity{}, err
	}
	if p.Capacity != nil {
		s.seats.SetCapacity(ctx, id, a.Capacity)
		s.seats.Changed(ctx, id)
	}
	return a, nil
}

// Seats returns the live seat display of an activity.
func (s *Service) Seats(ctx context.Context, id string) (capacity.Seats, error) {
	return s.seats.Seats(ctx, id)
}

// SignupInput is a signup request.
type SignupInput struct {
	ActivityID     string
	UserID         string
	Metadata       []byte // a compact JSON object
	IdempotencyKey string
}

// Signup admits the user to the activity, exactly: the display counter is a
// fast gate that refuses once full and otherwise holds a seat, and the
// authority decides in a group admission transaction. replayed is true when
// the outcome (registration or error) is the stored first outcome of the
// same Idempotency-Key.
func (s *Service) Signup(ctx context.Context, in SignupInput) (reg Registration, replayed bool, err error) {
	if err := validateSignup(in); err != nil {
		return Registration{}, false, err
	}
	req := AdmissionRequest{
		RegistrationID: s.newID("r_"),
		UserID:         in.UserID,
		Metadata:       in.Metadata,
		IdempotencyKey: in.IdempotencyKey,
	}
	if in.IdempotencyKey != "" {
		h := sha256.Sum256(in.Metadata)
		req.RequestHash = h[:]
		o, ok, err := s.store.FindOutcome(ctx, in.ActivityID, in.UserID, in.IdempotencyKey)
		if err != nil {
			return Registration{}, false, err
		}
		if ok {
			return s.finish(o.Result(req.RequestHash), "replayed")
		}
	}

	hold, gateErr := s.seats.Reserve(ctx, in.ActivityID)
	switch {
	case gateErr == nil:
	case errors.Is(gateErr, capacity.ErrFull):
		// A first use of an idempotency key must record its outcome at the
		// authority; everyone else is refused here without a query.
		if in.IdempotencyKey == "" {
			s.metrics.signups.WithLabelValues("full_gate").Inc()
			return Registration{}, false, ActivityFull(in.ActivityID)
		}
	case capacityd.ErrorCode(gateErr) != capacityd.EInternal:
		// The authority answered the rebuild: not_found or unavailable.
		return Registration{}, false, gateErr
	default:
		// No display tier, or Redis is failing: the authority alone decides.
	}

	res, err := s.admit.Submit(ctx, in.ActivityID, req)
	if err != nil || res.Err != nil || res.Replayed {
		// Only a fresh admission keeps its display hold.
		s.seats.Release(context.WithoutCancel(ctx), in.ActivityID, hold)
	}
	if err != nil {
		s.metrics.signups.WithLabelValues("error").Inc()
		if errors.Is(err, groupcommit.ErrClosed) {
			return Registration{}, false, capacityd.Unavailable(err, "the service is shutting down")
		}
		return Registration{}, false, err
	}
	return s.finish(res, "")
}

func (s *Service) finish(res AdmissionResult, outcome string) (Registration, bool, error) {
	if outcome == "" {
		outcome = "admitted"
		if res.Replayed {
			outcome = "replayed"
		} else if res.Err != nil {
			outcome = capacityd.ErrorCode(res.Err)
		}
	}
	s.metrics.signups.WithLabelValues(outcome).Inc()
	if res.Err != nil {
		return Registration{}, res.Replayed, res.Err
	}
	return *res.Registration, res.Replayed, nil
}

// admitBatch is the group-commit flush of one activity's signups.
func (s *Service) admitBatch(ctx context.Context, activityID string, reqs []AdmissionRequest) ([]AdmissionResult, error) {
	start := time.Now()
	res, err := s.store.Admit(ctx, activityID, reqs)
	s.metrics.batchSize.Observe(float64(len(reqs)))
	s.metrics.batchSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		s.metrics.admissionTx.WithLabelValues("error").Inc()
		return nil, err
	}
	s.metrics.admissionTx.WithLabelValues("ok").Inc()
	for _, r := range res {
		if r.Err == nil && !r.Replayed {
			s.seats.Changed(ctx, activityID)
			break
		}
	}
	return res, nil
}

func validateSignup(in SignupInput) error {
	if n := len(in.UserID); n < 1 || n > MaxUserIDLen {
		return capacityd.Errorf(capacityd.EInvalid, "user id must be 1 to %d characters", MaxUserIDLen)
	}
	if len(in.Metadata) > MaxMetadataBytes {
		return capacityd.Errorf(capacityd.EInvalid, "metadata must be at most %d bytes", MaxMetadataBytes)
	}
	return ValidateIdempotencyKey(in.IdempotencyKey)
}

// ValidateIdempotencyKey accepts "" (no key) or 1-255 printable ASCII
// characters.
func ValidateIdempotencyKey(k string) error {
	if len(k) > MaxIdempotencyKey {
		return capacityd.Errorf(capacityd.EInvalid, "Idempotency-Key must be at most %d characters", MaxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return capacityd.Errorf(capacityd.EInvalid, "Idempotency-Key must be printable ASCII")
		}
	}
	return nil
}

// GetRegistration returns a registration its owner or an admin may see;
// anyone else gets not_found.
func (s *Service) GetRegistration(ctx context.Context, id string, c Caller) (Registration, error) {
	r, err := s.store.GetRegistration(ctx, id)
	if err != nil {
		return Registration{}, err
	}
	if !c.Admin && r.UserID != c.UserID {
		return Registration{}, RegistrationNotFound(id)
	}
	return r, nil
}

// Cancel cancels a registration its owner or an admin may see. Cancelling a
// cancelled or expired registration returns it unchanged and frees nothing.
// The display counter is decremented only after the commit.
func (s *Service) Cancel(ctx context.Context, id string, c Caller) (Registration, error) {
	if _, err := s.GetRegistration(ctx, id, c); err != nil {
		return Registration{}, err
	}
	r, changed, err := s.store.Cancel(ctx, id)
	if err != nil {
		return Registration{}, err
	}
	if changed {
		s.seatsFreed(ctx, r.ActivityID, 1)
	}
	return r, nil
}

func (s *Service) seatsFreed(ctx context.Context, activityID string, n int) {
	ctx = context.WithoutCancel(ctx)
	s.seats.Freed(ctx, activityID, n)
	s.seats.Changed(ctx, activityID)
}

// SetStatus moves a registration to awaiting_payment or approved. Allowed:
// pending → awaiting_payment, pending → approved, awaiting_payment →
// approved, and expired → approved, which admits the registration again
// through the authority only if a seat is free.
func (s *Service) SetStatus(ctx context.Context, id string, to Status) (Registration, error) {
	switch to {
	case AwaitingPayment:
		return s.store.Transition(ctx, id, []Status{Pending}, AwaitingPayment, s.now())
	case Approved:
		r, err := s.store.Transition(ctx, id, []Status{Pending, AwaitingPayment}, Approved, s.now())
		if capacityd.ErrorCode(err) != capacityd.EInvalidTransition {
			return r, err
		}
		cur, gerr := s.store.GetRegistration(ctx, id)
		if gerr != nil || cur.Status != Expired {
			return r, err
		}
		return s.readmit(ctx, cur)
	default:
		if !to.Valid() {
			return Registration{}, capacityd.Errorf(capacityd.EInvalid, `status must be "awaiting_payment" or "approved"`)
		}
		cur, err := s.store.GetRegistration(ctx, id)
		if err != nil {
			return Registration{}, err
		}
		return Registration{}, capacityd.Errorf(capacityd.EInvalidTransition,
			"registration %s cannot move from %s to %s", id, cur.Status, to)
	}
}

// readmit takes an expired registration back like a signup: hold a seat in
// the display first, let the authority decide, release the hold if refused.
func (s *Service) readmit(ctx context.Context, cur Registration) (Registration, error) {
	hold, gateErr := s.seats.Reserve(ctx, cur.ActivityID)
	if errors.Is(gateErr, capacity.ErrFull) {
		return Registration{}, ActivityFull(cur.ActivityID)
	}
	r, err := s.store.Readmit(ctx, cur.ID)
	if err != nil {
		s.seats.Release(context.WithoutCancel(ctx), cur.ActivityID, hold)
		return Registration{}, err
	}
	s.seats.Changed(ctx, cur.ActivityID)
	return r, nil
}

// ListRegistrations returns one page of an activity's registrations in
// creation order.
func (s *Service) ListRegistrations(ctx context.Context, f ListFilter) (Page, error) {
	if f.Limit == 0 {
		f.Limit = DefaultListLimit
	}
	if f.Limit < 1 || f.Limit > MaxListLimit {
		return Page{}, capacityd.Errorf(capacityd.EInvalid, "limit must be between 1 and %d", MaxListLimit)
	}
	if f.Status != "" && !f.Status.Valid() {
		return Page{}, capacityd.Errorf(capacityd.EInvalid, "unknown status %q", f.Status)
	}
	if _, err := s.store.GetActivity(ctx, f.ActivityID); err != nil {
		return Page{}, err
	}
	want := f.Limit
	f.Limit++
	items, err := s.store.ListRegistrations(ctx, f)
	if err != nil {
		return Page{}, err
	}
	p := Page{Items: items}
	if len(items) > want {
		p.Items = items[:want]
		c := EncodeCursor(p.Items[want-1].Seq)
		p.NextCursor = &c
	}
	if p.Items == nil {
		p.Items = []Registration{}
	}
	return p, nil
}

// ExpireDue expires the awaiting_payment holds that are past due, in
// batches, and frees their seats in the display after each commit. It
// returns how many it expired.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	const batch = 500
	total := 0
	for {
		rs, err := s.store.ExpireHolds(ctx, s.now(), batch)
		if err != nil {
			return total, err
		}
		freed := make(map[string]int)
		for _, r := range rs {
			freed[r.ActivityID]++
		}
		for id, n := range freed {
			s.seatsFreed(ctx, id, n)
		}
		total += len(rs)
		s.metrics.expired.Add(float64(len(rs)))
		if len(rs) < batch {
			return total, nil
		}
	}
}

// RunExpiry calls ExpireDue every interval until ctx ends. Every instance
// runs it; SKIP LOCKED keeps them from expiring the same rows.
func (s *Service) RunExpiry(ctx context.Context, every time.Duration) {
	s.runEvery(ctx, every, "expire holds", func(ctx context.Context) error {
		_, err := s.ExpireDue(ctx)
		return err
	})
}

// RunOutcomePurge deletes idempotency records older than 24 hours (plus a
// margin) every interval until ctx ends.
func (s *Service) RunOutcomePurge(ctx context.Context, every time.Duration) {
	s.runEvery(ctx, every, "purge idempotency keys", func(ctx context.Context) error {
		_, err := s.store.PurgeOutcomes(ctx, s.now().Add(-25*time.Hour))
		return err
	})
}

func (s *Service) runEvery(ctx context.Context, every time.Duration, what string, f func(context.Context) error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			runCtx, cancel := context.WithTimeout(ctx, every+10*time.Second)
			if err := f(runCtx); err != nil && ctx.Err() == nil {
				s.log.Warn(what+" failed", "err", err)
			}
			cancel()
		}
	}
}
