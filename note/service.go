package note

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

// Defaults of Config.
const (
	DefaultMaxBatch     = 1000
	DefaultFlushTimeout = 5 * time.Second
	// DefaultMaxReadBatch caps the note ids one read statement takes.
	DefaultMaxReadBatch = 1000
)

// Config configures a Service.
type Config struct {
	Store Store
	// CombiningOff makes every increment its own upsert, with no
	// combining: the baseline to measure combining against. The zero
	// value combines.
	CombiningOff bool
	// MaxBatch caps the increments one upsert combines. Default
	// DefaultMaxBatch.
	MaxBatch int
	// FlushTimeout bounds how long an upsert waits for a database
	// connection. The statement itself is bounded by the database's
	// statement_timeout (see Store.AddNoteStats). Default
	// DefaultFlushTimeout.
	FlushTimeout time.Duration
	// Mode says which ids count: Open (the zero value) any, Registered
	// only those registered beforehand.
	Mode Mode
	// Now is the clock of the cache of unknown ids; default time.Now.
	Now func() time.Time
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// Service counts views and waters.
//
// With combining (the default), increments of one note that arrive while an
// upsert for that note is in flight queue up, and the next upsert takes up
// to MaxBatch of them at once, adding k views and j waters in one
// statement. A note with one request in flight costs one statement. Every
// caller is answered only after its upsert committed, with numbers that
// include its own increment: the batch is laid out in arrival order after
// the state the upsert started from, so view callers of a batch get
// distinct view numbers, each in 1..total, and the last equals the total
// (likewise for waters). A failed upsert fails every caller of its batch
// with unavailable and counts nothing. A caller whose context ends while
// its increment is still queued gets unavailable at once and is not
// counted; once taken by an upsert, it waits for that upsert's outcome.
//
// In Registered mode an increment adds to the note's row and creates none:
// the increment itself (an UPDATE … RETURNING) is the check that the note
// exists, so a known note costs no query more than in Open mode. An id
// found unknown is remembered for a few seconds (see unknownIDs), so that
// repeated increments of it cost no query either.
type Service struct {
	store        Store
	flushTimeout time.Duration
	metrics      *metrics
	mode         Mode
	unknown      *unknownIDs
	// combine is nil when combining is off.
	combine *groupcommit.Group[string, Kind, Stats]
	// reads coalesces the reads of counters: one statement in flight, for
	// every note read meanwhile.
	reads *groupcommit.Group[struct{}, string, Stats]

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup // uncombined increments
}

// NewService returns a Service.
func NewService(cfg Config) *Service {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.FlushTimeout <= 0 {
		cfg.FlushTimeout = DefaultFlushTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{store: cfg.Store, flushTimeout: cfg.FlushTimeout, metrics: newMetrics(cfg.Registerer),
		mode: cfg.Mode, unknown: newUnknownIDs(cfg.Now)}
	s.reads = groupcommit.New(groupcommit.PerKey(s.readAll), groupcommit.Options{MaxBatch: DefaultMaxReadBatch, FlushTimeout: cfg.FlushTimeout})
	if !cfg.CombiningOff {
		s.combine = groupcommit.New(groupcommit.PerKey(s.flush), groupcommit.Options{MaxBatch: cfg.MaxBatch, FlushTimeout: cfg.FlushTimeout})
	}
	return s
}

// View records one view of a note and returns its counters including it.
func (s *Service) View(ctx context.Context, noteID string) (Stats, error) {
	return s.Increment(ctx, noteID, View)
}

// Water records one water of a note and returns its counters including it.
func (s *Service) Water(ctx context.Context, noteID string) (Stats, error) {
	return s.Increment(ctx, noteID, Water)
}

// Increment records one increment of kind and returns the note's counters
// right after it, once it is committed. An error means it was not
// counted: when ctx ends before an upsert takes the increment, it is
// dropped and Increment returns unavailable; once taken, it is answered
// with the upsert's true outcome, even after ctx ends.
func (s *Service) Increment(ctx context.Context, noteID string, kind Kind) (Stats, error) {
	if err := ValidateID(noteID); err != nil {
		return Stats{}, err
	}
	if kind != View && kind != Water {
		return Stats{}, capacityd.Errorf(capacityd.EInvalid, "unknown kind of increment")
	}
	if err := ctx.Err(); err != nil {
		return Stats{}, capacityd.Unavailable(err, "the request ended before its increment was queued")
	}
	if s.mode == Registered && s.unknown.has(noteID) {
		s.metrics.unknown[kind].Inc()
		return Stats{}, NotRegistered(noteID)
	}
	if s.combine != nil {
		return s.submit(ctx, noteID, kind)
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Stats{}, capacityd.Unavailable(nil, "the service is shutting down")
	}
	s.inflight.Add(1)
	s.mu.Unlock()
	defer s.inflight.Done()
	// Like a combined one, the upsert runs to its outcome even if the
	// request ends.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.flushTimeout)
	defer cancel()
	res, err := s.flush(fctx, noteID, []Kind{kind})
	if err != nil {
		return Stats{}, err
	}
	return res[0], nil
}

// submit queues a combined increment and waits for its outcome; the group
// withdraws it if ctx ends while it is still queued.
func (s *Service) submit(ctx context.Context, noteID string, kind Kind) (Stats, error) {
	st, err := s.combine.Submit(ctx, noteID, kind)
	switch {
	case errors.Is(err, groupcommit.ErrWithdrawn):
		return Stats{}, capacityd.Unavailable(err, "the note's counters were not reached in time; nothing was counted")
	case errors.Is(err, groupcommit.ErrClosed):
		return Stats{}, capacityd.Unavailable(err, "the service is shutting down")
	}
	return st, err
}

// Mode returns the service's mode.
func (s *Service) Mode() Mode { return s.mode }

// Register creates a note with zero counters, unless it exists, and
// returns its counters; created tells which. It is idempotent, and allowed
// in every mode (so that notes can be registered before a deployment
// switches to Registered).
func (s *Service) Register(ctx context.Context, noteID string) (st Stats, created bool, err error) {
	if err := ValidateID(noteID); err != nil {
		return Stats{}, false, err
	}
	st, created, err = s.store.RegisterNote(ctx, noteID)
	if err == nil {
		s.unknown.forget(noteID)
	}
	return st, created, err
}

// Get returns a note's counters, zero for a note never seen, read at the
// authority: they include every increment acknowledged before Get was
// called. Concurrent reads share statements, one in flight at a time: a
// read that arrives while a statement runs waits for the next one, which
// starts after it arrived, so that public reads cost the database at most
// one statement at a time however many there are.
func (s *Service) Get(ctx context.Context, noteID string) (Stats, error) {
	if err := ValidateID(noteID); err != nil {
		return Stats{}, err
	}
	st, err := s.reads.Submit(ctx, struct{}{}, noteID)
	switch {
	case errors.Is(err, groupcommit.ErrWithdrawn):
		return Stats{}, capacityd.Unavailable(err, "the request ended before the note's counters were read")
	case errors.Is(err, groupcommit.ErrClosed):
		return Stats{}, capacityd.Unavailable(err, "the service is shutting down")
	case err != nil && !capacityd.IsCode(err, capacityd.EUnavailable):
		return Stats{}, capacityd.Unavailable(err, "the note's counters could not be read")
	}
	return st, err
}

// readAll is the flush of the reads: one statement for every note read.
func (s *Service) readAll(ctx context.Context, _ struct{}, ids []string) ([]Stats, error) {
	found, err := s.store.NotesStats(ctx, slices.Compact(slices.Sorted(slices.Values(ids))))
	if err != nil {
		return nil, err
	}
	byID := make(map[string]Stats, len(found))
	for _, st := range found {
		byID[st.NoteID] = st
	}
	out := make([]Stats, len(ids))
	for i, id := range ids {
		out[i] = Stats{NoteID: id, Views: byID[id].Views, Waters: byID[id].Waters}
	}
	return out, nil
}

// flush adds a batch of increments of one note in one upsert and answers
// each with the counters right after its own increment, in batch order.
func (s *Service) flush(ctx context.Context, noteID string, kinds []Kind) ([]Stats, error) {
	var views, waters int64
	for _, k := range kinds {
		if k == View {
			views++
		} else {
			waters++
		}
	}
	s.metrics.batchSize.Observe(float64(len(kinds)))
	add := s.store.AddNoteStats
	if s.mode == Registered {
		add = s.store.AddRegisteredNoteStats
	}
	total, err := add(ctx, noteID, views, waters)
	if capacityd.IsCode(err, capacityd.ENotFound) {
		s.unknown.add(noteID)
		s.count(s.metrics.unknown, views, waters)
		return nil, err
	}
	if err != nil {
		s.metrics.upsertErr.Inc()
		s.count(s.metrics.failed, views, waters)
		if !capacityd.IsCode(err, capacityd.EUnavailable) {
			err = capacityd.Unavailable(err, "the note's counters could not be updated")
		}
		return nil, err
	}
	s.metrics.upsertOK.Inc()
	s.count(s.metrics.committed, views, waters)

	out := make([]Stats, len(kinds))
	v, w := total.Views-views, total.Waters-waters
	for i, k := range kinds {
		if k == View {
			v++
		} else {
			w++
		}
		out[i] = Stats{NoteID: noteID, Views: v, Waters: w}
	}
	return out, nil
}

func (s *Service) count(by map[Kind]prometheus.Counter, views, waters int64) {
	if views > 0 {
		by[View].Add(float64(views))
	}
	if waters > 0 {
		by[Water].Add(float64(waters))
	}
}

// Close refuses new increments and waits until every accepted one has
// been committed or answered with an error, or until ctx ends.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if err := s.reads.Close(ctx); err != nil {
		return err
	}
	if s.combine != nil {
		if err := s.combine.Close(ctx); err != nil {
			return err
		}
	}
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
