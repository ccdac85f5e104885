package checkin

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/groupcommit"
	"github.com/physiciansnet/capacityd/registration"
)

// Store is what the door asks of the authority.
type Store interface {
	CreateCheckinList(ctx context.Context, id string, in NewList, now time.Time) (List, error)
	GetCheckinList(ctx context.Context, id string) (List, error)
	ListCheckinLists(ctx context.Context, activityID, before string, limit int) ([]List, error)
	UpdateCheckinList(ctx context.Context, id string, p ListPatch, now time.Time) (List, error)
	DeleteCheckinList(ctx context.Context, id string) error
	// RedeemBatch decides and records the scans of one list in order, in
	// one transaction; a refused scan is answered alone.
	RedeemBatch(ctx context.Context, listID string, ins []Redemption, now time.Time) ([]RedeemOutcome, error)
	Checkins(ctx context.Context, listID string, after int64, limit int) ([]CheckIn, error)
	SyncTickets(ctx context.Context, listID string, cursor *SyncCursor, limit int) (SyncPage, error)
	CheckinKeys(ctx context.Context, first func() (StoredKey, error)) ([]StoredKey, error)
}

// Registrations is what the door asks of the registration service: a
// registration as its owner or an admin sees it, and a walk-in's signup.
type Registrations interface {
	GetRegistration(ctx context.Context, id string, c registration.Caller) (registration.Registration, error)
	Signup(ctx context.Context, in registration.SignupInput) (registration.Registration, bool, error)
}

// Announcer tells every instance that something changed (an activity's
// history, a list's counts), and lets a reader wait for it.
type Announcer interface {
	// AnnounceAll announces each of ids, together.
	AnnounceAll(ctx context.Context, ids []string)
	Watch(id string) (<-chan struct{}, func())
}

// Observer is told of the events a check-in recorded (webhook delivery).
type Observer interface {
	Committed(ctx context.Context, commits []registration.Commit)
}

// Config wires a Service.
type Config struct {
	Store         Store
	Registrations Registrations
	Sealer        Sealer
	// Announcer and Observer may be nil.
	Announcer Announcer
	Observer  Observer
	Now       func() time.Time
	// Registerer receives the door's metrics; nil: not registered.
	Registerer prometheus.Registerer
	// GatherFor is the longest a busy list's next transaction waits for
	// its devices' next scans (DefaultGatherFor in a deployment's
	// settings; zero: never waits). After a transaction of at least
	// GatherAt scans, the next waits until as many more have queued, or
	// for GatherFor: devices that each wait for their answer otherwise
	// split into two halves, one scanning while the other's transaction
	// runs, and every scan pays for half as large a transaction.
	GatherFor time.Duration
	// SeatChanges, if set, makes a busy list yield to the instance's seat
	// changes (see yieldFactor); nil: it never does.
	SeatChanges SeatChanges
}

// GatherAt is the size of a list's transaction after which the next one
// gathers (Config.GatherFor).
const GatherAt = 8

// DefaultGatherFor is the deployment's default Config.GatherFor: about
// two transactions of a rush's batch.
const DefaultGatherFor = 5 * time.Millisecond

// Service runs the doors: lists, scans, tickets and the sync feed.
type Service struct {
	cfg     Config
	keys    *Keyring
	mu      sync.Mutex
	loaded  time.Time
	entropy *ulid.MonotonicEntropy
	idMu    sync.Mutex
	metrics *metrics
	// scans gathers the concurrent scans of each list into one
	// transaction.
	scans *groupcommit.Group[string, Redemption, RedeemOutcome]
	// telling counts the batches whose commits are being told (see
	// flushScans); Close waits for them.
	telling sync.WaitGroup
}

// NewService returns a Service. It reads its keys when Run starts, or at
// their first use.
func NewService(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{cfg: cfg, keys: NewKeyring(nil), entropy: ulid.Monotonic(rand.Reader, 0), metrics: newMetrics(cfg.Registerer)}
	s.scans = groupcommit.New(groupcommit.PerKey(s.flushScans), groupcommit.Options{
		MaxBatch: maxScanBatch, GatherAt: GatherAt, GatherFor: cfg.GatherFor, GatherEnded: s.metrics.gatherEnded,
		Rest: s.rest,
	})
	return s
}

// maxScanBatch bounds the scans of one list's transaction.
const maxScanBatch = 200

// flushScans runs one list's gathered scans in one transaction, then
// tells the other instances and webhook delivery what it recorded: once
// per list and activity, however many scans the batch took. The telling
// (a Redis round trip: about 0.1 ms a batch in a rush, 0.3 ms beside
// hot signups) runs beside the answers, not before them: a rush's devices
// wait for every transaction of their list, and would wait for it too.
// What it tells wakes watchers to read what was committed; it may reach
// them in any order.
func (s *Service) flushScans(ctx context.Context, listID string, ins []Redemption) ([]RedeemOutcome, error) {
	start := time.Now()
	out, err := s.cfg.Store.RedeemBatch(ctx, listID, ins, s.cfg.Now().UTC())
	s.metrics.batchSize.Observe(float64(len(ins)))
	s.metrics.batchSeconds.Observe(time.Since(start).Seconds())
	if err == nil {
		tell := context.WithoutCancel(ctx) // the flush's context ends when it returns
		s.telling.Go(func() { s.committed(tell, listID, out) })
	}
	return out, err
}

// Close answers the scans queued so far, refuses new ones, and waits
// until their commits are told.
func (s *Service) Close(ctx context.Context) error {
	err := s.scans.Close(ctx)
	s.telling.Wait()
	return err
}

func (s *Service) newID(prefix string) string {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	return prefix + ulid.MustNew(ulid.Timestamp(time.Now()), s.entropy).String()
}

// Ticket is a registration's ticket, as its owner shows it.
type Ticket struct {
	RegistrationID string `json:"registration_id"`
	ActivityID     string `json:"activity_id"`
	Seats          int    `json:"seats"`
	Ticket         string `json:"ticket"`
}

// Ticket returns the ticket of a registration its owner or an admin may
// see: ticket_revoked while it holds no seat. The same registration gets
// the same ticket from every instance while the key is the same.
func (s *Service) Ticket(ctx context.Context, registrationID string, c registration.Caller) (Ticket, error) {
	reg, err := s.cfg.Registrations.GetRegistration(ctx, registrationID, c)
	if err != nil {
		return Ticket{}, err
	}
	if !reg.Status.Occupying() {
		return Ticket{}, capacityd.Errorf(capacityd.ETicketRevoked, "registration %s holds no seat (it is %s): it has no ticket", reg.ID, reg.Status)
	}
	if err := s.ready(ctx); err != nil {
		return Ticket{}, err
	}
	tok, err := s.keys.Sign(TicketClaims{Reg: reg.ID, Act: reg.ActivityID, Iat: reg.CreatedAt.Unix()})
	if err != nil {
		return Ticket{}, err
	}
	return Ticket{RegistrationID: reg.ID, ActivityID: reg.ActivityID, Seats: max(reg.Seats, 1), Ticket: tok}, nil
}

// Redeem decides and records a scan at a list, for an admin or the list's
// door staff.
func (s *Service) Redeem(ctx context.Context, listID string, in RedeemInput, c registration.Caller) (out Redeemed, err error) {
	defer func() { s.metrics.scanned(out, err) }()
	now := s.cfg.Now().UTC()
	if err := in.Validate(now); err != nil {
		return Redeemed{}, err
	}
	red := Redemption{ListID: listID, RegistrationID: in.RegistrationID, Origin: originOf(c),
		Scan: Scan{Type: in.Type, Device: in.Device, Force: in.Force}, IdempotencyKey: in.IdempotencyKey,
		Allowed: func(l List) error { return Allowed(l, c) }}
	if in.IdempotencyKey != "" {
		red.RequestHash = in.hash()
	}
	if in.At != nil {
		red.Scan.At = in.At.UTC()
	}
	if in.Ticket != "" {
		claims, err := s.verify(ctx, in.Ticket)
		if err != nil {
			return Redeemed{}, err
		}
		red.RegistrationID, red.TicketActivity, red.ByTicket = claims.Reg, claims.Act, true
	}
	o, err := s.scans.Submit(ctx, listID, red)
	if err != nil {
		return Redeemed{}, registration.UnavailableIfNotFlushed(err)
	}
	return o.Redeemed, o.Err
}

// committed announces a batch's list and activities, each once, and
// hands its events to webhook delivery, by activity.
func (s *Service) committed(ctx context.Context, listID string, out []RedeemOutcome) {
	var commits []registration.Commit
	byActivity := map[string]int{}
	for _, o := range out {
		if o.Err != nil || o.Replayed || o.Event.ActivityID == "" {
			continue
		}
		i, ok := byActivity[o.Event.ActivityID]
		if !ok {
			i = len(commits)
			byActivity[o.Event.ActivityID] = i
			commits = append(commits, registration.Commit{ActivityID: o.Event.ActivityID})
		}
		commits[i].Events = append(commits[i].Events, o.Event)
	}
	if len(commits) == 0 {
		return
	}
	ids := make([]string, 0, 1+len(commits))
	ids = append(ids, listID)
	for _, c := range commits {
		ids = append(ids, c.ActivityID)
	}
	s.announce(ctx, ids...)
	if s.cfg.Observer != nil {
		s.cfg.Observer.Committed(ctx, commits)
	}
}

// announce announces ids together, when there is an Announcer.
func (s *Service) announce(ctx context.Context, ids ...string) {
	if s.cfg.Announcer != nil {
		s.cfg.Announcer.AnnounceAll(ctx, ids)
	}
}

// originOf is the caller as a check-in's event records it.
func originOf(c registration.Caller) registration.Origin {
	o := registration.Origin{Actor: c.Actor()}
	if registration.ValidRequestID(c.RequestID) {
		o.RequestID = c.RequestID
	}
	return o
}

// Keyset returns the public keys.
func (s *Service) Keyset(ctx context.Context) (JWKSet, error) {
	if err := s.ready(ctx); err != nil {
		return JWKSet{}, err
	}
	return s.keys.JWKS(), nil
}
