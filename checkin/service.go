package checkin

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
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
	Announce(ctx context.Context, id string)
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
}

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
}

// NewService returns a Service. It reads its keys when Run starts, or at
// their first use.
func NewService(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{cfg: cfg, keys: NewKeyring(nil), entropy: ulid.Monotonic(rand.Reader, 0), metrics: newMetrics(cfg.Registerer)}
	s.scans = groupcommit.New(groupcommit.PerKey(s.flushScans), groupcommit.Options{MaxBatch: maxScanBatch})
	return s
}

// maxScanBatch bounds the scans of one list's transaction.
const maxScanBatch = 200

// flushScans runs one list's gathered scans in one transaction, then
// tells the other instances and webhook delivery what it recorded: once
// per list and activity, however many scans the batch took.
func (s *Service) flushScans(ctx context.Context, listID string, ins []Redemption) ([]RedeemOutcome, error) {
	out, err := s.cfg.Store.RedeemBatch(ctx, listID, ins, s.cfg.Now().UTC())
	if err == nil {
		s.committed(ctx, listID, out)
	}
	return out, err
}

// Close answers the scans queued so far and refuses new ones.
func (s *Service) Close(ctx context.Context) error { return s.scans.Close(ctx) }

// Keys returns the keyring.
func (s *Service) Keys() *Keyring { return s.keys }

// Load reads the check-in keys, making the first one when there is none.
func (s *Service) Load(ctx context.Context) error {
	stored, err := s.cfg.Store.CheckinKeys(ctx, func() (StoredKey, error) {
		k, err := NewKey(s.cfg.Now().UTC())
		if err != nil {
			return StoredKey{}, err
		}
		return SealKey(s.cfg.Sealer, k)
	})
	if err != nil {
		return err
	}
	keys := make([]Key, 0, len(stored))
	var sealed error
	for _, sk := range stored {
		k, err := openKey(s.cfg.Sealer, sk)
		if err != nil {
			// A key this instance cannot open (another WEBHOOK_SECRET_KEY)
			// is left out; the others still serve.
			sealed = err
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 && sealed != nil {
		return capacityd.Unavailable(sealed, "no check-in key opens with this instance's WEBHOOK_SECRET_KEY")
	}
	s.keys.Set(keys)
	s.mu.Lock()
	s.loaded = time.Now()
	s.mu.Unlock()
	return nil
}

// KeyRefresh is how often Run reads the keys again, so that a key that
// another instance or "capacityd ticket-key rotate" added signs here too.
const KeyRefresh = time.Minute

// Run reads the keys at once, then every interval (0: KeyRefresh) until
// ctx ends; a failed read keeps the keys this instance has.
func (s *Service) Run(ctx context.Context, every time.Duration) {
	// The keys are read (the first one made) here, not when the service
	// is made: a start does not wait for the database, and the first use
	// reads them if this has not yet.
	_ = s.Load(ctx)
	t := time.NewTicker(cmp.Or(every, KeyRefresh))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = s.Load(ctx)
		}
	}
}

// reloadEvery bounds how often a ticket with an unknown kid reloads the
// keys (another instance may have rotated them).
const reloadEvery = 5 * time.Second

// ready reads the keys when this instance has none yet (the first use
// after a start whose database did not answer, or the first key of a new
// database): the service starts without them.
func (s *Service) ready(ctx context.Context) error {
	if s.keys.Len() > 0 {
		return nil
	}
	if err := s.Load(ctx); err != nil {
		return capacityd.Unavailable(err, "the check-in keys could not be read; retry later")
	}
	return nil
}

// SignAs signs claims with the newest check-in key and the typ given
// (attendance statements), reading the keys first if need be.
func (s *Service) SignAs(ctx context.Context, claims jwt.Claims, typ string) (string, error) {
	if err := s.ready(ctx); err != nil {
		return "", err
	}
	return s.keys.SignAs(claims, typ)
}

// verify checks a ticket, reloading the keys once when it names a key
// this instance does not know yet.
func (s *Service) verify(ctx context.Context, ticket string) (TicketClaims, error) {
	if err := s.ready(ctx); err != nil {
		return TicketClaims{}, err
	}
	c, err := s.keys.VerifyTicket(ticket)
	if !errors.Is(err, ErrUnknownKey) {
		return c, err
	}
	s.mu.Lock()
	stale := time.Since(s.loaded) > reloadEvery
	s.mu.Unlock()
	if stale {
		if err := s.Load(ctx); err != nil {
			return TicketClaims{}, err
		}
		if c, err = s.keys.VerifyTicket(ticket); !errors.Is(err, ErrUnknownKey) {
			return c, err
		}
	}
	return TicketClaims{}, InvalidTicket("it is signed with a key this service does not know")
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

// CreateList makes a list.
func (s *Service) CreateList(ctx context.Context, in NewList) (List, error) {
	if err := in.Validate(); err != nil {
		return List{}, err
	}
	return s.cfg.Store.CreateCheckinList(ctx, s.newID("cl_"), in, s.cfg.Now().UTC())
}

// GetList returns a list to an admin or its door staff.
func (s *Service) GetList(ctx context.Context, id string, c registration.Caller) (List, error) {
	l, err := s.cfg.Store.GetCheckinList(ctx, id)
	if err != nil {
		return List{}, err
	}
	return l, allowed(l, c)
}

// allowed checks that c is an admin or door staff of l.
func allowed(l List, c registration.Caller) error {
	if c.Admin || l.DoorOf(c.Roles) {
		return nil
	}
	return capacityd.Errorf(capacityd.EForbidden, "check-in list %s is for admins and its door roles", l.ID)
}

// Lists returns a page of lists, newest first; of one activity's when
// activityID is set.
func (s *Service) Lists(ctx context.Context, activityID, before string, limit int) (ListPage, error) {
	ls, err := s.cfg.Store.ListCheckinLists(ctx, activityID, before, limit+1)
	if err != nil {
		return ListPage{}, err
	}
	page := ListPage{Items: ls}
	if len(ls) > limit {
		page.Items = ls[:limit]
		next := ls[limit-1].ID
		page.NextCursor = &next
	}
	if page.Items == nil {
		page.Items = []List{}
	}
	return page, nil
}

// UpdateList changes a list.
func (s *Service) UpdateList(ctx context.Context, id string, p ListPatch) (List, error) {
	l, err := s.cfg.Store.UpdateCheckinList(ctx, id, p, s.cfg.Now().UTC())
	if err == nil {
		s.announce(ctx, l.ID)
	}
	return l, err
}

// DeleteList deletes a list.
func (s *Service) DeleteList(ctx context.Context, id string) error {
	return s.cfg.Store.DeleteCheckinList(ctx, id)
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
		Allowed: func(l List) error { return allowed(l, c) }}
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
		return Redeemed{}, err
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
	s.announce(ctx, listID)
	for _, c := range commits {
		s.announce(ctx, c.ActivityID)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Committed(ctx, commits)
	}
}

func (s *Service) announce(ctx context.Context, id string) {
	if s.cfg.Announcer != nil {
		s.cfg.Announcer.Announce(ctx, id)
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

// CheckinPage is one page of a list's history.
type CheckinPage struct {
	Items     []CheckIn `json:"items"`
	NextAfter int64     `json:"next_after"`
}

// Checkins returns a page of a list's check-ins after seq after.
func (s *Service) Checkins(ctx context.Context, listID string, after int64, limit int, c registration.Caller) (CheckinPage, error) {
	if _, err := s.GetList(ctx, listID, c); err != nil {
		return CheckinPage{}, err
	}
	cis, err := s.cfg.Store.Checkins(ctx, listID, after, limit)
	if err != nil {
		return CheckinPage{}, err
	}
	page := CheckinPage{Items: cis, NextAfter: after}
	if len(cis) > 0 {
		page.NextAfter = cis[len(cis)-1].Seq
	}
	if page.Items == nil {
		page.Items = []CheckIn{}
	}
	return page, nil
}

// syncPoll is how often a quiet long poll of the sync feed looks again
// when no announcement wakes it.
const syncPoll = time.Second

// Tickets returns a page of a list's ticket sync feed. With wait, a page
// of changes that is empty waits up to that long for one.
func (s *Service) Tickets(ctx context.Context, listID, cursor string, limit int, wait time.Duration, c registration.Caller) (SyncPage, error) {
	l, err := s.GetList(ctx, listID, c)
	if err != nil {
		return SyncPage{}, err
	}
	var cur *SyncCursor
	if cursor != "" {
		parsed, err := DecodeSyncCursor(cursor)
		if err != nil {
			return SyncPage{}, err
		}
		cur = &parsed
	}
	var woken <-chan struct{}
	if wait > 0 && cur != nil && s.cfg.Announcer != nil {
		ch := make(chan struct{}, 1)
		for _, id := range l.ActivityIDs {
			w, stop := s.cfg.Announcer.Watch(id)
			defer stop()
			go relay(ctx, w, ch)
		}
		woken = ch
	}
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	poll := time.NewTicker(syncPoll)
	defer poll.Stop()
	for {
		page, err := s.cfg.Store.SyncTickets(ctx, listID, cur, limit)
		if err != nil || len(page.Items) > 0 || wait <= 0 || cur == nil || cur.Full {
			return page, err
		}
		select {
		case <-woken:
		case <-poll.C:
		case <-timeout.C:
			return page, nil
		case <-ctx.Done():
			return page, nil
		}
	}
}

// relay passes the signals of one watch on to ch until ctx ends or the
// watch closes.
func relay(ctx context.Context, from <-chan struct{}, to chan struct{}) {
	for {
		select {
		case _, ok := <-from:
			if !ok {
				return
			}
			select {
			case to <- struct{}{}:
			default:
			}
		case <-ctx.Done():
			return
		}
	}
}

// WalkIn signs a user up for an activity of the list at the door, skipping
// its admission queue, and checks them in at once when they got a seat
// (answer "entered"); a waitlisted walk-in is the standby line at the
// door (answer "waitlisted", no check-in).
func (s *Service) WalkIn(ctx context.Context, listID string, in WalkInInput, c registration.Caller) (Answer, error) {
	if err := in.Validate(); err != nil {
		return Answer{}, err
	}
	l, err := s.GetList(ctx, listID, c)
	if err != nil {
		return Answer{}, err
	}
	if !l.Has(in.ActivityID) {
		return Answer{}, capacityd.Errorf(capacityd.EWrongList, "activity %s is not on check-in list %s", safe(in.ActivityID), l.ID)
	}
	door := c
	reg, _, err := s.cfg.Registrations.Signup(ctx, registration.SignupInput{ActivityID: in.ActivityID,
		Caller: registration.Caller{UserID: in.UserID, RequestID: c.RequestID}, Metadata: []byte("{}"), Seats: in.Seats, Door: &door})
	if err != nil {
		return Answer{}, err
	}
	if !reg.Status.Occupying() {
		return Answer{Result: "waitlisted", Registration: reg, Inside: l.Inside, MaxInside: l.MaxInside}, nil
	}
	out, err := s.Redeem(ctx, listID, RedeemInput{RegistrationID: reg.ID, Type: TypeEntry, Device: in.Device}, c)
	if err != nil {
		return Answer{}, err
	}
	return out.Answer(), nil
}

// WalkInInput is a walk-in's request.
type WalkInInput struct {
	ActivityID string
	UserID     string
	Seats      int
	Device     string
}

// Validate checks the request and fills its defaults.
func (in *WalkInInput) Validate() error {
	if in.Seats == 0 {
		in.Seats = 1
	}
	if in.Device == "" {
		in.Device = "walk-in"
	}
	if in.ActivityID == "" {
		return capacityd.Errorf(capacityd.EInvalid, "activity_id is required")
	}
	if !registration.ValidUserIDLength(in.UserID) {
		return capacityd.Errorf(capacityd.EInvalid, "user_id must be 1 to %d characters", registration.MaxUserIDLen)
	}
	if in.Seats < 1 || in.Seats > registration.MaxSeatsLimit {
		return capacityd.Errorf(capacityd.EInvalid, "seats must be between 1 and the activity's max_seats_per_registration")
	}
	return ValidDevice(in.Device)
}

// Keyset returns the public keys.
func (s *Service) Keyset(ctx context.Context) (JWKSet, error) {
	if err := s.ready(ctx); err != nil {
		return JWKSet{}, err
	}
	return s.keys.JWKS(), nil
}
