package stream

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// Hub defaults.
const (
	DefaultStreamInterval = 100 * time.Millisecond
	DefaultMaxStreams     = 10000
	DefaultStreamBuffer   = 8

	// readTimeout bounds one read of an activity's seats.
	readTimeout = 3 * time.Second
)

// SeatsFunc reads the current seat display of an activity, as
// capacity.Counter.Seats does.
type SeatsFunc func(ctx context.Context, activityID string) (registration.Seats, error)

// HubConfig configures a Hub.
type HubConfig struct {
	// Changes tells the hub when a watched activity changed, on any
	// instance.
	Changes *Notifier
	// Seats reads an activity's seats: once per activity per event, never
	// per client.
	Seats SeatsFunc
	// Interval is the least time between two events of one activity.
	// Default 100ms.
	Interval time.Duration
	// MaxStreams caps the subscribers of this instance; beyond it
	// Subscribe refuses with unavailable. Default 10000.
	MaxStreams int
	// Buffer is the number of events a subscriber may fall behind before
	// it is dropped. Default 8.
	Buffer int
	// Registerer registers the stream metrics; nil means none.
	Registerer prometheus.Registerer
}

// Hub fans seat changes out to the live streams of this instance. It keeps
// the subscribers of each watched activity, watches the activity's
// announcements, reads its seats once per change (coalescing changes to at
// most one event per Interval) and hands the same encoded event to every
// subscriber without ever waiting for one: a subscriber whose buffer is
// full is dropped.
type Hub struct {
	changes *Notifier
	seats   SeatsFunc
	every   time.Duration
	max     int
	buffer  int
	metrics *hubMetrics

	seq atomic.Uint64 // last event id

	mu      sync.Mutex
	topics  map[string]*topic
	clients int
	closed  bool
	done    chan struct{}
}

// topic is one watched activity of this instance.
type topic struct {
	id   string
	stop chan struct{} // closed when the last subscriber leaves
	subs map[*Subscriber]struct{}
	// lastSeats are the seats of the last event sent (valid when sent):
	// a read with the same numbers sends nothing.
	lastSeats registration.Seats
	sent      bool
}

// Subscriber is one stream's view of an activity's events.
type Subscriber struct {
	hub     *Hub
	topic   *topic
	initial []byte
	events  chan []byte
	done    chan struct{}
	once    sync.Once
}

// NewHub returns a Hub. Close ends every stream.
func NewHub(cfg HubConfig) *Hub {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultStreamInterval
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultStreamBuffer
	}
	return &Hub{
		changes: cfg.Changes, seats: cfg.Seats, every: cfg.Interval,
		max: cfg.MaxStreams, buffer: cfg.Buffer,
		metrics: newHubMetrics(cfg.Registerer),
		topics:  make(map[string]*topic), done: make(chan struct{}),
	}
}

// Subscribe registers a stream of the activity's seats. The subscriber's
// first event (Initial) is the current state; a not_found error means the
// activity does not exist, an unavailable one that this instance already
// serves MaxStreams streams or the seats could not be read. Close the
// subscriber when the stream ends.
func (h *Hub) Subscribe(ctx context.Context, activityID string) (*Subscriber, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, capacityd.Unavailable(nil, "the server is shutting down")
	}
	if h.clients >= h.max {
		h.mu.Unlock()
		h.metrics.rejected.Inc()
		return nil, capacityd.Unavailable(nil, "too many seat streams on this instance; retry later")
	}
	t := h.topics[activityID]
	if t == nil {
		t = &topic{id: activityID, stop: make(chan struct{}), subs: make(map[*Subscriber]struct{})}
		h.topics[activityID] = t
		changed, unwatch := h.changes.Watch(activityID)
		go h.runTopic(t, changed, unwatch)
	}
	s := &Subscriber{hub: h, topic: t, events: make(chan []byte, h.buffer), done: make(chan struct{})}
	t.subs[s] = struct{}{}
	h.clients++
	h.metrics.clients.Set(float64(h.clients))
	h.mu.Unlock()

	// Each new stream reads the current state itself (from Redis while the
	// counter is warm): a connection is not a change, and an event of the
	// topic may be up to Interval old.
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	seats, err := h.seats(rctx, activityID)
	cancel()
	if err != nil {
		s.Close()
		return nil, err
	}
	s.initial = h.encode(seats)
	h.mu.Lock()
	if !t.sent {
		t.lastSeats, t.sent = seats, true
	}
	h.mu.Unlock()
	return s, nil
}

// Initial is the subscriber's first event: the activity's current state.
func (s *Subscriber) Initial() []byte { return s.initial }

// Events delivers the encoded events that follow Initial.
func (s *Subscriber) Events() <-chan []byte { return s.events }

// Done is closed when the subscriber was dropped for falling behind or the
// hub was closed; the stream should end.
func (s *Subscriber) Done() <-chan struct{} { return s.done }

// Close unregisters the subscriber. It is safe to call more than once.
func (s *Subscriber) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	h.remove(s)
	if t := s.topic; len(t.subs) == 0 && h.topics[t.id] == t {
		delete(h.topics, t.id)
		close(t.stop)
	}
}

// remove takes s out of its topic and ends it. h.mu is held.
func (h *Hub) remove(s *Subscriber) {
	if _, ok := s.topic.subs[s]; ok {
		delete(s.topic.subs, s)
		h.clients--
		h.metrics.clients.Set(float64(h.clients))
	}
	s.once.Do(func() { close(s.done) })
}

// runTopic reads the activity's seats after each change, at most once per
// Interval, and fans the event out, until the topic's last subscriber
// leaves. A read that fails is tried again at the next change.
func (h *Hub) runTopic(t *topic, changed <-chan struct{}, unwatch func()) {
	defer unwatch()
	var lastSent time.Time
	for {
		select {
		case <-t.stop:
			return
		case <-h.done:
			return
		case <-changed:
		}
		if wait := h.every - time.Since(lastSent); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-t.stop:
				timer.Stop()
				return
			case <-h.done:
				timer.Stop()
				return
			case <-timer.C:
			}
		}
		// Changes announced until now are covered by the read below.
		select {
		case <-changed:
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		seats, err := h.seats(ctx, t.id)
		cancel()
		if err != nil {
			h.metrics.readErrors.Inc()
			continue
		}
		if h.broadcast(t, seats) {
			lastSent = time.Now()
		}
	}
}

// broadcast sends one event with seats to every subscriber of t without
// blocking: a subscriber whose buffer is full is dropped. Nothing is sent
// when the numbers are those last sent (a re-read on a timer, or a change
// that left them as they were); it reports whether an event went out.
func (h *Hub) broadcast(t *topic, seats registration.Seats) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.sent && sameNumbers(t.lastSeats, seats) {
		return false
	}
	ev := h.encode(seats)
	t.lastSeats, t.sent = seats, true
	h.metrics.events.Inc()
	for s := range t.subs {
		select {
		case s.events <- ev:
		default:
			h.metrics.dropped.Inc()
			h.remove(s)
		}
	}
	return true
}

func sameNumbers(a, b registration.Seats) bool {
	return a.Capacity == b.Capacity && a.Taken == b.Taken && a.Remaining == b.Remaining && a.Waiting == b.Waiting &&
		a.Source == b.Source
}

// encode returns seats as one server-sent event with a fresh id.
func (h *Hub) encode(seats registration.Seats) []byte {
	data, _ := json.Marshal(seats)
	b := make([]byte, 0, len(data)+48)
	b = append(b, "event: seats\nid: "...)
	b = strconv.AppendUint(b, h.seq.Add(1), 10)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// Streams returns the number of subscribers of this instance.
func (h *Hub) Streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clients
}

// Close ends every stream and refuses new ones; Run returns. It is safe to
// call more than once.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	close(h.done)
	for _, t := range h.topics {
		for s := range t.subs {
			h.remove(s)
		}
		delete(h.topics, t.id)
	}
}

type hubMetrics struct {
	clients    prometheus.Gauge
	events     prometheus.Counter
	dropped    prometheus.Counter
	rejected   prometheus.Counter
	readErrors prometheus.Counter
}

func newHubMetrics(reg prometheus.Registerer) *hubMetrics {
	m := &hubMetrics{
		clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capacityd_seat_streams",
			Help: "Open seat streams on this instance.",
		}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_seat_stream_events_total",
			Help: "Seat events fanned out (each counted once, whatever the number of streams).",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_seat_streams_dropped_total",
			Help: "Seat streams dropped for not reading their events.",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_seat_streams_rejected_total",
			Help: "Seat streams refused because the instance already had its maximum.",
		}),
		readErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_seat_stream_read_errors_total",
			Help: "Failed reads of an activity's seats for its streams.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.clients, m.events, m.dropped, m.rejected, m.readErrors)
	}
	return m
}
