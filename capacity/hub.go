package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/physiciansnet/capacityd"
)

// Hub defaults.
const (
	DefaultStreamInterval  = 100 * time.Millisecond
	DefaultRefreshInterval = 5 * time.Second
	DefaultMaxStreams      = 10000
	DefaultStreamBuffer    = 8

	// readTimeout bounds one read of an activity's seats.
	readTimeout = 3 * time.Second
	// recoveryPolling is the least time streams keep being re-read on a
	// timer after the subscription came back.
	recoveryPolling = 5 * time.Second
)

// SeatsFunc reads the current seat display of an activity, as
// Counter.Seats does.
type SeatsFunc func(ctx context.Context, activityID string) (Seats, error)

// HubConfig configures a Hub.
type HubConfig struct {
	// Redis carries the change announcements of every instance on Channel;
	// nil means none, and streams are refreshed every RefreshInterval.
	Redis redis.UniversalClient
	// Seats reads an activity's seats: once per activity per event, never
	// per client.
	Seats SeatsFunc
	// Interval is the least time between two events of one activity.
	// Default 100ms.
	Interval time.Duration
	// RefreshInterval is how often the seats of watched activities are
	// re-read while the Redis subscription is down. Default 5s.
	RefreshInterval time.Duration
	// MaxStreams caps the subscribers of this instance; beyond it
	// Subscribe refuses with unavailable. Default 10000.
	MaxStreams int
	// Buffer is the number of events a subscriber may fall behind before
	// it is dropped. Default 8.
	Buffer int
	// Logger logs subscription failures.
	Logger *slog.Logger
	// Registerer registers the stream metrics; nil means none.
	Registerer prometheus.Registerer
}

// Hub fans seat changes out to the live streams of this instance. It holds
// one Redis subscription on Channel for the whole instance, keeps the
// subscribers of each watched activity, reads an activity's seats once per
// change (coalescing changes to at most one event per Interval) and hands
// the same encoded event to every subscriber without ever waiting for one:
// a subscriber whose buffer is full is dropped.
type Hub struct {
	rdb     redis.UniversalClient
	seats   SeatsFunc
	every   time.Duration
	refresh time.Duration
	max     int
	buffer  int
	log     *slog.Logger
	metrics *hubMetrics

	seq     atomic.Uint64 // last event id
	healthy atomic.Bool   // the Redis subscription is up
	// recoveredAt (unix nanoseconds) is when the subscription came back
	// after a failure; zero before any failure.
	recoveredAt atomic.Int64

	mu      sync.Mutex
	topics  map[string]*topic
	clients int
	closed  bool
	done    chan struct{}
}

// topic is one watched activity of this instance.
type topic struct {
	id     string
	notify chan struct{} // capacity 1: a change not yet read
	stop   chan struct{} // closed when the last subscriber leaves
	subs   map[*Subscriber]struct{}
	// lastSeats are the seats of the last event sent (valid when sent),
	// against which refreshes on a timer are compared.
	lastSeats Seats
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

// NewHub returns a Hub. Call Run to start its subscription and Close to
// end every stream.
func NewHub(cfg HubConfig) *Hub {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultStreamInterval
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultStreamBuffer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Hub{
		rdb: cfg.Redis, seats: cfg.Seats, every: cfg.Interval, refresh: cfg.RefreshInterval,
		max: cfg.MaxStreams, buffer: cfg.Buffer, log: cfg.Logger,
		metrics: newHubMetrics(cfg.Registerer),
		topics:  make(map[string]*topic), done: make(chan struct{}),
	}
}

// Run holds the instance's Redis subscription until ctx ends or the hub is
// closed, subscribing again (with backoff) whenever it breaks. While it is
// down, watched activities are re-read every RefreshInterval; when it comes
// back, every watched activity is re-read once, since changes may have been
// missed. Without Redis, Run only waits.
func (h *Hub) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-h.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if h.rdb == nil {
		<-ctx.Done()
		return
	}
	const minBackoff, maxBackoff = 100 * time.Millisecond, 2 * time.Second
	backoff := minBackoff
	lastLog := time.Time{}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		subscribed, err := h.listen(ctx, attempt > 0)
		h.healthy.Store(false)
		h.metrics.subscribed.Set(0)
		if ctx.Err() != nil {
			return
		}
		if subscribed {
			backoff = minBackoff
		}
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			h.log.Warn("seat stream subscription down; refreshing streams from the authority", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// listen subscribes to Channel and dispatches its messages until the
// connection fails. It pings the server when the channel is quiet, so a
// silent loss of the connection is noticed. subscribed reports whether the
// subscription was confirmed.
func (h *Hub) listen(ctx context.Context, again bool) (subscribed bool, err error) {
	ps := h.rdb.Subscribe(ctx, Channel)
	defer ps.Close()
	// Closing the subscription is what interrupts a blocked receive.
	defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
	pinged := false
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, h.refresh)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged && subscribed {
				pinged = true
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				err = ps.Ping(pctx)
				cancel()
				if err == nil {
					continue
				}
			}
			return subscribed, err
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == Channel {
				subscribed = true
				if again {
					h.recoveredAt.Store(time.Now().UnixNano())
				}
				h.healthy.Store(true)
				h.metrics.subscribed.Set(1)
				h.notifyAll()
			}
		case *redis.Message:
			h.notify(m.Payload)
		}
	}
	return subscribed, ctx.Err()
}

// Healthy reports whether the Redis subscription is up.
func (h *Hub) Healthy() bool { return h.healthy.Load() }

// polling reports whether watched activities are to be re-read on a timer:
// while the subscription is down, and for a while after it came back,
// since the instances that publish changes may still believe Redis down
// and skip their announcements.
func (h *Hub) polling() bool {
	if !h.healthy.Load() {
		return true
	}
	at := h.recoveredAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < max(recoveryPolling, 2*h.refresh)
}

// notify marks the activity as changed; its topic reads it soon.
func (h *Hub) notify(activityID string) {
	h.mu.Lock()
	t := h.topics[activityID]
	h.mu.Unlock()
	if t != nil {
		t.poke()
	}
}

// notifyAll marks every watched activity as changed.
func (h *Hub) notifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.topics {
		t.poke()
	}
}

func (t *topic) poke() {
	select {
	case t.notify <- struct{}{}:
	default:
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
		t = &topic{id: activityID, notify: make(chan struct{}, 1), stop: make(chan struct{}),
			subs: make(map[*Subscriber]struct{})}
		h.topics[activityID] = t
		go h.runTopic(t)
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
// leaves. While the Redis subscription is down it re-reads them every
// RefreshInterval and sends them when they differ.
func (h *Hub) runTopic(t *topic) {
	refresh := time.NewTicker(h.refresh)
	defer refresh.Stop()
	var lastSent time.Time
	failed := false // the last read failed: retry at the next tick
	for {
		poll := false
		select {
		case <-t.stop:
			return
		case <-h.done:
			return
		case <-t.notify:
		case <-refresh.C:
			if !h.polling() && !failed {
				continue
			}
			poll = !failed
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
		case <-t.notify:
			poll = false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		seats, err := h.seats(ctx, t.id)
		cancel()
		failed = err != nil
		if err != nil {
			h.metrics.readErrors.Inc()
			continue
		}
		h.broadcast(t, seats, poll)
		lastSent = time.Now()
	}
}

// broadcast sends one event with seats to every subscriber of t without
// blocking: a subscriber whose buffer is full is dropped. With onlyChanged
// nothing is sent when the numbers are those last sent.
func (h *Hub) broadcast(t *topic, seats Seats, onlyChanged bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if onlyChanged && t.sent && sameNumbers(t.lastSeats, seats) {
		return
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
}

func sameNumbers(a, b Seats) bool {
	return a.Capacity == b.Capacity && a.Taken == b.Taken && a.Source == b.Source
}

// encode returns seats as one server-sent event with a fresh id.
func (h *Hub) encode(seats Seats) []byte {
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
	subscribed prometheus.Gauge
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
		subscribed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capacityd_seat_stream_subscribed",
			Help: "1 while this instance's Redis subscription to seat changes is up.",
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
		reg.MustRegister(m.clients, m.subscribed, m.events, m.dropped, m.rejected, m.readErrors)
	}
	return m
}
