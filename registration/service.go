package registration

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/groupcommit"
	"github.com/physiciansnet/capacityd/internal/loop"
)

// Defaults of the change queue.
const (
	DefaultMaxBatch        = 1000
	DefaultMaxActivities   = 256
	DefaultMaxTransactions = 1
	DefaultGatherAt        = 64
	DefaultGatherFor       = 50 * time.Millisecond
)

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
	// have queued, or for GatherFor (default 50ms), whichever comes
	// first. A crowd then commits in fewer, larger transactions instead of
	// batches that stay near half the crowd (see groupcommit.Options).
	// A negative GatherFor never gathers.
	GatherAt  int
	GatherFor time.Duration
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
	checks    *groupcommit.Group[string, string, fullVerdict]
	lookups   *groupcommit.Group[struct{}, string, lookup]
	metrics   *metrics

	idMu    sync.Mutex
	entropy *ulid.MonotonicEntropy
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
	s.queue = groupcommit.New(s.apply, groupcommit.Options{
		MaxBatch:     cmp.Or(cfg.MaxBatch, DefaultMaxBatch),
		MaxKeys:      cmp.Or(cfg.MaxActivities, DefaultMaxActivities),
		MaxFlushes:   cmp.Or(cfg.MaxTransactions, DefaultMaxTransactions),
		FlushTimeout: cmp.Or(cfg.ChangeTimeout, 10*time.Second),
		GatherAt:     cmp.Or(cfg.GatherAt, DefaultGatherAt),
		GatherFor:    max(cmp.Or(cfg.GatherFor, DefaultGatherFor), 0),
		GatherEnded:  s.metrics.gatherEnded,
	})
	s.checks = groupcommit.New(s.checkFull, groupcommit.Options{
		MaxBatch: cmp.Or(cfg.MaxBatch, DefaultMaxBatch), MaxKeys: DefaultMaxActivities, MaxFlushes: 2,
	})
	// Registrations are looked up by id in one statement for the lookups
	// that arrive together (one key: one statement in flight), since a
	// cancellation or status change must read its registration to find
	// the activity whose queue it goes to.
	s.lookups = groupcommit.New(s.lookupBatches, groupcommit.Options{MaxBatch: cmp.Or(cfg.MaxBatch, DefaultMaxBatch)})
	return s
}

// Close applies the changes queued so far and refuses new ones.
func (s *Service) Close(ctx context.Context) error {
	return errors.Join(s.queue.Close(ctx), s.checks.Close(ctx), s.lookups.Close(ctx))
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
	return *out.Activity, nil
}

// SignupInput is a signup request: the caller signs up for the activity.
type SignupInput struct {
	ActivityID     string
	Caller         Caller
	Metadata       []byte // a compact JSON object
	IdempotencyKey string
}

// Signup admits the caller to the activity, puts them on its waiting list,
// or refuses, exactly. The display tier's gate holds a seat for the signup
// in flight, or sheds it when every seat is taken; a refusal as full is
// always confirmed by the authority first. The authority decides on the
// activity's queue. replayed is true when the outcome (registration or
// error) is the stored first outcome of the same Idempotency-Key.
func (s *Service) Signup(ctx context.Context, in SignupInput) (reg Registration, replayed bool, err error) {
	if err := validateSignup(in); err != nil {
		return Registration{}, false, err
	}
	cmd := SignupCommand{
		Origin:         in.Caller.origin(),
		RegistrationID: s.newID("r_"),
		UserID:         in.Caller.UserID,
		Metadata:       in.Metadata,
		IdempotencyKey: in.IdempotencyKey,
	}
	if in.IdempotencyKey != "" {
		h := sha256.Sum256(in.Metadata)
		cmd.RequestHash = h[:]
		o, ok, err := s.store.FindOutcome(ctx, in.ActivityID, cmd.UserID, in.IdempotencyKey)
		if err != nil {
			return Registration{}, false, err
		}
		if ok {
			return s.signupResult(o.Replay(cmd.RequestHash), "replayed")
		}
	}
	if s.gate != nil {
		hold, err := s.gate.Reserve(ctx, in.ActivityID)
		switch {
		case err == nil:
			cmd.Hold = hold
		case errors.Is(err, ErrGateFull):
			// A first use of an idempotency key must record its outcome
			// at the authority, in the change transaction.
			if in.IdempotencyKey == "" {
				if err := s.confirmFull(ctx, in.ActivityID, cmd.UserID); err != nil {
					return Registration{}, false, err
				}
			}
		case errors.Is(err, ErrGateWaitlist):
		default:
			// No counter yet, or the display tier cannot answer: the
			// authority decides alone.
		}
	}
	out, err := s.submit(ctx, in.ActivityID, cmd)
	if err != nil {
		s.metrics.signups.WithLabelValues("error").Inc()
		return Registration{}, false, err
	}
	return s.signupResult(out, "")
}

// confirmFull asks the authority whether the activity the gate called full
// is full for the user, in one read-only snapshot shared with the other
// signups the gate shed meanwhile. It returns the refusal (activity_full,
// or already_registered for a user who holds or waits for a place), a
// failure, or nil when the signup must go on to the activity's queue:
// Admit, on the authority's counts, gives it a seat (the gate's holds were
// not all admissions in flight) or a place on the waiting list.
func (s *Service) confirmFull(ctx context.Context, activityID, userID string) error {
	v, err := s.checks.Submit(ctx, activityID, userID)
	switch {
	case err != nil:
		s.metrics.signups.WithLabelValues("error").Inc()
		return unavailableIfNotFlushed(err)
	case v.holder != "":
		s.metrics.signups.WithLabelValues("already_registered").Inc()
		return AlreadyRegistered(activityID, v.holder)
	case Admit(v.counts) == AdmitFull:
		s.metrics.signups.WithLabelValues("full_gate").Inc()
		return ActivityFull(activityID)
	}
	s.metrics.fullChecksPassed.Inc()
	return nil
}

// fullVerdict is one user's answer from a FullAnswer: the activity's
// counts and the user's active registration, if any.
type fullVerdict struct {
	counts Counts
	holder string
}

// checkFull is the flush of the full checks: one snapshot of the authority
// for the shed signups of many activities. A check that fails on one
// request's data is made again without it (groupcommit.Isolate).
func (s *Service) checkFull(ctx context.Context, batches []*groupcommit.Batch[string, string, fullVerdict]) error {
	return groupcommit.Isolate(s.checkFullOnce, commandsAtFault)(ctx, batches)
}

func (s *Service) checkFullOnce(ctx context.Context, batches []*groupcommit.Batch[string, string, fullVerdict]) error {
	checks := make([]FullCheck, len(batches))
	for i, b := range batches {
		checks[i] = FullCheck{ActivityID: b.Key, UserIDs: b.Reqs}
	}
	answers, err := s.store.CheckFull(ctx, checks)
	if err != nil {
		return err
	}
	for i, b := range batches {
		a := answers[i]
		b.Results = make([]fullVerdict, len(b.Reqs))
		for j, u := range b.Reqs {
			b.Results[j] = fullVerdict{counts: a.Counts(), holder: a.Holders[u]}
		}
	}
	return nil
}

func (s *Service) signupResult(out Outcome, label string) (Registration, bool, error) {
	if label == "" {
		switch {
		case out.Replayed:
			label = "replayed"
		case out.Err != nil:
			label = capacityd.ErrorCode(out.Err)
		case out.Registration.Status == Waitlisted:
			label = "waitlisted"
		default:
			label = "admitted"
		}
	}
	s.metrics.signups.WithLabelValues(label).Inc()
	if out.Err != nil {
		return Registration{}, out.Replayed, out.Err
	}
	return *out.Registration, out.Replayed, nil
}

func validateSignup(in SignupInput) error {
	if !storable(in.ActivityID) {
		return ActivityNotFound(in.ActivityID)
	}
	if err := validateCaller(in.Caller); err != nil {
		return err
	}
	if !storable(string(in.Metadata)) {
		return capacityd.Errorf(capacityd.EInvalid, "metadata must be valid UTF-8 without NUL characters")
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

// submit queues a command on its activity and waits for its outcome. A
// signup's display hold is given back if the command never reaches a
// transaction.
func (s *Service) submit(ctx context.Context, activityID string, c Command) (Outcome, error) {
	if !storable(activityID) {
		return Outcome{}, ActivityNotFound(activityID)
	}
	out, err := s.queue.Submit(ctx, activityID, c)
	if errors.Is(err, groupcommit.ErrClosed) || errors.Is(err, groupcommit.ErrWithdrawn) {
		// Never flushed: its hold goes back here.
		if sc, ok := c.(SignupCommand); ok && sc.Hold.Held() {
			s.notify(context.WithoutCancel(ctx), []Commit{{ActivityID: activityID, Failed: true, Holds: []Hold{sc.Hold}}})
		}
	}
	return out, unavailableIfNotFlushed(err)
}

// unavailableIfNotFlushed turns the errors of a request that no flush took
// (the service closing, or the request's deadline passing while it waited
// in its queue) into unavailable: nothing was written.
func unavailableIfNotFlushed(err error) error {
	switch {
	case errors.Is(err, groupcommit.ErrClosed):
		return capacityd.Unavailable(err, "the service is shutting down")
	case errors.Is(err, groupcommit.ErrWithdrawn):
		return capacityd.Unavailable(err, "the request's deadline passed while it waited in its queue; nothing was written")
	}
	return err
}

// apply is the flush of the change queue: one transaction for the queued
// commands of many activities, then the observers, then the answers. A
// transaction that fails on one command's data is run again without it
// (groupcommit.Isolate): only that command is answered with the error.
func (s *Service) apply(ctx context.Context, batches []*groupcommit.Batch[string, Command, Outcome]) error {
	var commits []Commit
	err := groupcommit.Isolate(func(ctx context.Context, part []*groupcommit.Batch[string, Command, Outcome]) error {
		in := make([]CommandBatch, len(part))
		for i, b := range part {
			in[i] = CommandBatch{ActivityID: b.Key, Commands: b.Reqs}
		}
		applied, err := s.transact(ctx, in)
		if err != nil {
			return err
		}
		for i, b := range part {
			if applied[i].Err != nil {
				b.Err = applied[i].Err
				continue
			}
			p := applied[i].Plan
			b.Results = p.Outcomes
			commits = append(commits, Commit{ActivityID: b.Key, Holds: holdsOf(b.Reqs),
				Events: p.Events, ActivityChanged: p.ActivityChanged,
				State: SeatState{Capacity: p.Activity.Capacity, Waitlist: p.Activity.Waitlist,
					Taken: p.Activity.Taken, Waiting: p.Activity.Waiting, LastSeq: p.LastSeq, UpdatedAt: p.Activity.UpdatedAt}})
			s.metrics.count(p.Events)
		}
		return nil
	}, commandsAtFault)(ctx, batches)
	// The holds of the commands that failed go back; those of the
	// committed ones went with their commits.
	for _, b := range batches {
		var failed []Command
		for j, c := range b.Reqs {
			if err != nil || b.Err != nil || (b.Errs != nil && b.Errs[j] != nil) {
				failed = append(failed, c)
			}
		}
		if hs := holdsOf(failed); len(hs) > 0 {
			commits = append(commits, Commit{ActivityID: b.Key, Failed: true, Holds: hs})
		}
	}
	s.notify(ctx, commits)
	return err
}

// commandsAtFault reports whether a change transaction's failure may be the
// fault of its commands' data (a value the database refuses, or a rule
// broken): such a transaction is run again without the command at fault.
// An unavailable database is nobody's fault.
func commandsAtFault(err error) bool {
	return !capacityd.IsCode(err, capacityd.EUnavailable)
}

// transact runs one change transaction and counts it.
func (s *Service) transact(ctx context.Context, in []CommandBatch) ([]Applied, error) {
	start := time.Now()
	n := 0
	for _, b := range in {
		n += len(b.Commands)
	}
	applied, err := s.store.Apply(ctx, in, s.now())
	s.metrics.batchSize.Observe(float64(n))
	s.metrics.batchActivities.Observe(float64(len(in)))
	s.metrics.batchSeconds.Observe(time.Since(start).Seconds())
	result := "ok"
	if err != nil {
		result = "error"
	}
	s.metrics.transactions.WithLabelValues(result).Inc()
	return applied, err
}

func holdsOf(cmds []Command) []Hold {
	var hs []Hold
	for _, c := range cmds {
		if sc, ok := c.(SignupCommand); ok && sc.Hold.Held() {
			hs = append(hs, sc.Hold)
		}
	}
	return hs
}

// notify tells every observer about commits, in order.
func (s *Service) notify(ctx context.Context, commits []Commit) {
	for _, o := range s.observers {
		o.Committed(ctx, commits)
	}
}

// changeOf submits a command that names an existing registration and
// returns the registration after it.
func (s *Service) changeOf(ctx context.Context, r Registration, c Command) (Registration, error) {
	out, err := s.submit(ctx, r.ActivityID, c)
	if err != nil {
		return Registration{}, err
	}
	if out.Err != nil {
		return Registration{}, out.Err
	}
	return *out.Registration, nil
}

// GetRegistration returns a registration its owner or an admin may see;
// anyone else gets not_found.
func (s *Service) GetRegistration(ctx context.Context, id string, c Caller) (Registration, error) {
	r, err := s.lookup(ctx, id)
	if err != nil {
		return Registration{}, err
	}
	if !c.Admin && r.UserID != c.UserID {
		return Registration{}, RegistrationNotFound(id)
	}
	return r, nil
}

// lookup is one registration's answer from a batched lookup.
type lookup struct {
	reg   Registration
	found bool
}

// lookup returns the registration id, read with the lookups of other
// requests.
func (s *Service) lookup(ctx context.Context, id string) (Registration, error) {
	if !storable(id) {
		return Registration{}, RegistrationNotFound(id)
	}
	l, err := s.lookups.Submit(ctx, struct{}{}, id)
	switch {
	case err != nil:
		return Registration{}, unavailableIfNotFlushed(err)
	case !l.found:
		return Registration{}, RegistrationNotFound(id)
	}
	return l.reg, nil
}

// lookupBatches is the flush of the lookups; a lookup that fails on one
// request's id is made again without it (groupcommit.Isolate).
func (s *Service) lookupBatches(ctx context.Context, batches []*groupcommit.Batch[struct{}, string, lookup]) error {
	return groupcommit.Isolate(groupcommit.PerKey(s.lookupAll), commandsAtFault)(ctx, batches)
}

// lookupAll looks up the ids of one flush in one statement.
func (s *Service) lookupAll(ctx context.Context, _ struct{}, ids []string) ([]lookup, error) {
	regs, err := s.store.GetRegistrations(ctx, slices.Compact(slices.Sorted(slices.Values(ids))))
	if err != nil {
		return nil, err
	}
	byID := make(map[string]Registration, len(regs))
	for _, r := range regs {
		byID[r.ID] = r
	}
	out := make([]lookup, len(ids))
	for i, id := range ids {
		out[i].reg, out[i].found = byID[id]
	}
	return out, nil
}

// Cancel cancels a registration its owner or an admin may see: it frees
// the seat, or the place on the waiting list, and the first in line takes
// a freed seat in the same transaction. Cancelling a cancelled or expired
// registration returns it unchanged and frees nothing.
func (s *Service) Cancel(ctx context.Context, id string, c Caller) (Registration, error) {
	if err := validateCaller(c); err != nil {
		return Registration{}, err
	}
	r, err := s.GetRegistration(ctx, id, c)
	if err != nil || !r.Status.Active() {
		return r, err
	}
	return s.changeOf(ctx, r, CancelCommand{Origin: c.origin(), RegistrationID: id, Caller: c})
}

// SetStatus moves a registration to awaiting_payment or approved; see
// Decide for the transitions allowed.
func (s *Service) SetStatus(ctx context.Context, id string, to Status, c Caller) (Registration, error) {
	if !to.Valid() {
		return Registration{}, capacityd.Errorf(capacityd.EInvalid, `status must be "awaiting_payment" or "approved"`)
	}
	if err := validateCaller(c); err != nil {
		return Registration{}, err
	}
	r, err := s.lookup(ctx, id)
	if err != nil {
		return Registration{}, err
	}
	if to != AwaitingPayment && to != Approved {
		return Registration{}, InvalidTransition(r, to)
	}
	return s.changeOf(ctx, r, StatusCommand{Origin: c.origin(), RegistrationID: id, To: to})
}

// ListRegistrations returns one page of an activity's registrations in
// creation order.
func (s *Service) ListRegistrations(ctx context.Context, f ListFilter) (Page, error) {
	limit, err := pageLimit(f.Limit)
	if err != nil {
		return Page{}, err
	}
	if f.Status != "" && !f.Status.Valid() {
		return Page{}, capacityd.Errorf(capacityd.EInvalid, "unknown status %q", f.Status)
	}
	if _, err := s.store.GetActivity(ctx, f.ActivityID); err != nil {
		return Page{}, err
	}
	f.Limit = limit + 1
	items, err := s.store.ListRegistrations(ctx, f)
	return pageOf(items, limit), err
}

// ExportRegistrations streams an activity's registrations (of status, when
// set) in creation order to emit; see Store.ExportRegistrations. The
// activity must exist.
func (s *Service) ExportRegistrations(ctx context.Context, activityID string, status Status, emit func(Registration) error) error {
	if status != "" && !status.Valid() {
		return capacityd.Errorf(capacityd.EInvalid, "unknown status %q", status)
	}
	if _, err := s.store.GetActivity(ctx, activityID); err != nil {
		return err
	}
	return s.store.ExportRegistrations(ctx, activityID, status, emit)
}

// UserRegistrations returns one page of a user's own registrations over
// all activities, newest first.
func (s *Service) UserRegistrations(ctx context.Context, f UserFilter) (Page, error) {
	limit, err := pageLimit(f.Limit)
	if err != nil {
		return Page{}, err
	}
	f.Limit = limit + 1
	items, err := s.store.UserRegistrations(ctx, f)
	return pageOf(items, limit), err
}

func pageLimit(n int) (int, error) {
	if n == 0 {
		return DefaultListLimit, nil
	}
	if n < 1 || n > MaxListLimit {
		return 0, capacityd.Errorf(capacityd.EInvalid, "limit must be between 1 and %d", MaxListLimit)
	}
	return n, nil
}

// pageOf cuts registrations (read with one extra) to a page of limit.
func pageOf(items []Registration, limit int) Page {
	var p Page
	p.Items, p.NextCursor = cutPage(items, limit, func(r Registration) string { return r.ID })
	return p
}

// cutPage cuts items, read with one extra, to limit (never nil, so that
// an empty page is an empty list) and returns the cursor of the next page
// when the extra one was there.
func cutPage[T any](items []T, limit int, id func(T) string) ([]T, *string) {
	if items == nil {
		return []T{}, nil
	}
	if len(items) <= limit {
		return items, nil
	}
	items = items[:limit]
	c := EncodeCursor(id(items[limit-1]))
	return items, &c
}

// RegistrationEvents returns the events of a registration its owner or an
// admin may see, in seq order.
func (s *Service) RegistrationEvents(ctx context.Context, id string, c Caller) ([]Event, error) {
	if _, err := s.GetRegistration(ctx, id, c); err != nil {
		return nil, err
	}
	evs, err := s.store.RegistrationEvents(ctx, id)
	if evs == nil {
		evs = []Event{}
	}
	return evs, err
}

// feedPoll is how often an empty long poll re-reads the feed when no
// Changes wake it.
const feedPoll = time.Second

// ActivityEvents returns the activity's events after f.After. With f.Wait,
// an empty page waits up to that long for the next event, woken by the
// activity's change announcements: it holds no database connection while
// it waits.
func (s *Service) ActivityEvents(ctx context.Context, f EventFilter) (EventPage, error) {
	if err := f.Validate(); err != nil {
		return EventPage{}, err
	}
	var changed <-chan struct{}
	var poll <-chan time.Time
	if f.Wait > 0 {
		if s.changes != nil {
			ch, stop := s.changes.Watch(f.ActivityID)
			defer stop()
			changed = ch
		} else {
			t := time.NewTicker(feedPoll)
			defer t.Stop()
			poll = t.C
		}
	}
	timeout := time.NewTimer(f.Wait)
	defer timeout.Stop()
	for {
		evs, err := s.store.ActivityEvents(ctx, f)
		if err != nil {
			return EventPage{}, err
		}
		if len(evs) > 0 || f.Wait == 0 {
			return eventPage(evs, f.After), nil
		}
		select {
		case <-changed:
		case <-poll:
		case <-timeout.C:
			return eventPage(nil, f.After), nil
		case <-ctx.Done():
			return eventPage(nil, f.After), nil
		}
	}
}

func eventPage(evs []Event, after int64) EventPage {
	p := EventPage{Items: evs, NextAfter: after}
	if len(evs) > 0 {
		p.NextAfter = evs[len(evs)-1].Seq
	}
	if p.Items == nil {
		p.Items = []Event{}
	}
	return p
}

// expiryBatch is how many due holds one claim takes.
const expiryBatch = 500

// ExpireDue expires the awaiting_payment holds that are past due: it
// claims them in batches, then applies them as commands on their
// activities' queues, where the first in line takes each freed seat. It
// returns how many it expired.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	total := 0
	for {
		due, err := s.store.ClaimDueHolds(ctx, s.now(), expiryBatch)
		if err != nil || len(due) == 0 {
			return total, err
		}
		n, err := s.expire(ctx, due)
		total += n
		s.metrics.expired.Add(float64(n))
		if err != nil || len(due) < expiryBatch || n == 0 {
			return total, err
		}
	}
}

// expire submits one expiry per due hold, all at once, and counts those
// that expired (another instance may have been first).
func (s *Service) expire(ctx context.Context, due []DueHold) (int, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	n := 0
	origin := Origin{Actor: ActorSystem}
	for _, d := range due {
		wg.Go(func() {
			out, err := s.submit(ctx, d.ActivityID, ExpireCommand{Origin: origin, RegistrationID: d.RegistrationID})
			mu.Lock()
			defer mu.Unlock()
			if err = cmp.Or(err, out.Err); err != nil {
				errs = append(errs, err)
			} else if out.Changed {
				n++
			}
		})
	}
	wg.Wait()
	return n, errors.Join(errs...)
}

// RunExpiry calls ExpireDue every interval until ctx ends. Every instance
// runs it.
func (s *Service) RunExpiry(ctx context.Context, every time.Duration) {
	loop.Every(ctx, every, s.log, "expire holds", func(ctx context.Context) error {
		_, err := s.ExpireDue(ctx)
		return err
	})
}

// RunOutcomePurge deletes idempotency records older than 24 hours (plus a
// margin) every interval until ctx ends.
func (s *Service) RunOutcomePurge(ctx context.Context, every time.Duration) {
	loop.Every(ctx, every, s.log, "purge idempotency keys", func(ctx context.Context) error {
		_, err := s.store.PurgeOutcomes(ctx, s.now().Add(-25*time.Hour))
		return err
	})
}
