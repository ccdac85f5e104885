package loadtest

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// updateMarks are the signups answered while dashboards watch their
// activity: for each, when its answer came and how far an event's taken
// must be above the base (the taken when the marks began) to be sure to
// show it. Safe for concurrent use.
type updateMarks struct {
	base   time.Time
	sent   atomic.Int64
	failed atomic.Int64

	mu    sync.RWMutex
	marks []updateMark
}

// updateMark is one signup answered with a seat. at is when its answer
// came, since the marks' base; need is the signups sent before then, less
// those that had failed. The seat counter counts only signups that were
// sent, so an event read before this one committed shows at most need-1
// above the base: an event showing need or more was read after it
// committed, and shows it. (Taken read after the commit may still show
// less, while signups sent later are not yet counted: that event is not
// taken as the one that showed it, and the latency recorded is the time
// until the first event that is sure to, never less.)
type updateMark struct {
	at   time.Duration
	need int64
}

func newUpdateMarks() *updateMarks { return &updateMarks{base: time.Now()} }

// since is the time from the marks' base until now.
func (m *updateMarks) since() time.Duration { return time.Since(m.base) }

// sending counts a signup about to be sent.
func (m *updateMarks) sending() { m.sent.Add(1) }

// failedOne counts a signup that was sent and took no seat.
func (m *updateMarks) failedOne() { m.failed.Add(1) }

// answered marks a signup answered with a seat just now.
func (m *updateMarks) answered() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.marks = append(m.marks, updateMark{at: m.since(), need: m.sent.Load() - m.failed.Load()})
}

// snapshot returns the marks made so far, in the order they were made. A
// mark is never changed once made, and later ones are appended beyond the
// returned length.
func (m *updateMarks) snapshot() []updateMark {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.marks
}

// dashboardView is what one dashboard's seat stream has shown of the
// marks: the first next marks, each recorded in lat; shown is the taken
// above the base of the latest event.
type dashboardView struct {
	next  int
	shown int64
	lat   *Latencies
}

// saw takes a seat event that arrived at (since the marks' base) showing
// shown seats above the base, marks being the marks made so far, and
// records the latency of every mark it is the first to show: from the
// answer to the event. A mark an earlier event showed already is
// recorded as 0: it was made after that event was taken in (else the
// event would have delivered it), so its answer came after the dashboard
// showed it. Marks are taken in order: one that needs more than the event
// shows holds back those after it.
func (v *dashboardView) saw(marks []updateMark, shown int64, at time.Duration) {
	for ; v.next < len(marks); v.next++ {
		mk := marks[v.next]
		switch {
		case mk.need <= v.shown:
			v.lat.Record(0)
		case mk.need <= shown:
			v.lat.Record(max(0, at-mk.at))
		default:
			v.shown = max(v.shown, shown)
			return
		}
	}
	v.shown = max(v.shown, shown)
}

// finish delivers, once the stream is closed, the marks made after its
// last event that it showed already (latency 0), and returns how many of
// marks it never showed.
func (v *dashboardView) finish(marks []updateMark) (missing int) {
	v.saw(marks, v.shown, 0)
	return len(marks) - v.next
}

// dashboard is one organiser's live dashboard: its view of the seat
// stream (written by that stream's reader alone, read once it ended), and
// what the others may read meanwhile.
type dashboard struct {
	view dashboardView
	// open is set once its seat stream delivered its first event; shown
	// is view.shown, for the wait for the last marks.
	open  atomic.Bool
	shown atomic.Int64
}

// dashboardGroup is the dashboards of one activity and one of its
// check-in lists: each reads the activity's seats once (the page's first
// render, from the display tier), then follows its seat stream and the
// list's counts stream.
type dashboardGroup struct {
	activity, list string
	marks          *updateMarks
	boards         []*dashboard

	// base is the taken the marks count from; events are compared with it
	// once armed.
	base  atomic.Int64
	armed atomic.Bool

	seatsOpen, seatsFailed atomic.Int64
	listsOpen, listsFailed atomic.Int64
	// listEvents counts the counts events after each stream's first, once
	// armed.
	listEvents atomic.Int64

	mu  sync.Mutex
	err error
}

func newDashboardGroup(activity, list string, n int) *dashboardGroup {
	g := &dashboardGroup{activity: activity, list: list, marks: newUpdateMarks(), boards: make([]*dashboard, n)}
	for i := range g.boards {
		g.boards[i] = &dashboard{view: dashboardView{lat: NewLatencies()}}
	}
	return g
}

// arm starts comparing the seat events with base, the activity's taken
// before the marked signups begin.
func (g *dashboardGroup) arm(base int64) {
	g.base.Store(base)
	g.armed.Store(true)
}

// fail records a stream that did not open (unless ctx ended: the
// dashboards were closed).
func (g *dashboardGroup) fail(ctx context.Context, failed *atomic.Int64, err error) {
	if ctx.Err() != nil {
		return
	}
	failed.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.err = err
	}
}

func (g *dashboardGroup) firstError() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// watchSeats is dashboard i's seat half: one read of the seats, then the
// seat stream until ctx ends. Once armed, every event is compared with
// the marks.
func (g *dashboardGroup) watchSeats(ctx context.Context, api *client.Client, i int) {
	d := g.boards[i]
	if _, err := api.Seats(ctx, g.activity); err != nil {
		g.fail(ctx, &g.seatsFailed, err)
		return
	}
	s, err := api.StreamSeats(ctx, g.activity)
	if err != nil {
		g.fail(ctx, &g.seatsFailed, err)
		return
	}
	defer s.Close()
	for {
		st, err := s.Next()
		if err != nil {
			if !d.open.Load() {
				g.fail(ctx, &g.seatsFailed, err)
			}
			return
		}
		at := g.marks.since()
		if !d.open.Load() {
			d.open.Store(true)
			g.seatsOpen.Add(1)
		}
		if !g.armed.Load() {
			continue
		}
		d.view.saw(g.marks.snapshot(), int64(st.Taken)-g.base.Load(), at)
		d.shown.Store(d.view.shown)
	}
}

// watchList is a dashboard's list half: the list's counts stream until
// ctx ends.
func (g *dashboardGroup) watchList(ctx context.Context, api *client.Client) {
	s, err := api.StreamCheckinCounts(ctx, g.list)
	if err != nil {
		g.fail(ctx, &g.listsFailed, err)
		return
	}
	defer s.Close()
	for first := true; ; first = false {
		if _, err := s.Next(); err != nil {
			if first {
				g.fail(ctx, &g.listsFailed, err)
			}
			return
		}
		switch {
		case first:
			g.listsOpen.Add(1)
		case g.armed.Load():
			g.listEvents.Add(1)
		}
	}
}

// allShown reports whether every open dashboard's seat stream shows need
// or more above the base.
func (g *dashboardGroup) allShown(need int64) bool {
	for _, d := range g.boards {
		if d.open.Load() && d.shown.Load() < need {
			return false
		}
	}
	return true
}

// updates is, once every stream ended, each open dashboard's latencies
// merged, the marks they showed and those they did not.
func (g *dashboardGroup) updates() (lat *Latencies, shown, missing int64) {
	marks := g.marks.snapshot()
	lat = NewLatencies()
	for _, d := range g.boards {
		if !d.open.Load() {
			continue
		}
		missing += int64(d.view.finish(marks))
		shown += int64(d.view.next)
		lat.Merge(d.view.lat)
	}
	return lat, shown, missing
}

// dashboardStreams opens the streams of a group's dashboards on a
// transport of their own (no overall timeout: the streams stay open) and
// closes them all at once.
type dashboardStreams struct {
	g             *dashboardGroup
	public, admin *client.Client
	tr            *http.Transport
	ctx           context.Context
	cancel        context.CancelFunc
	wg            sync.WaitGroup
	once          sync.Once
}

// newDashboardStreams prepares g's streams to the service at base; the
// list streams carry the admin token.
func newDashboardStreams(ctx context.Context, g *dashboardGroup, base, admin string) *dashboardStreams {
	tr := &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: -1, ResponseHeaderTimeout: 15 * time.Second, DisableCompression: true}
	hc := &http.Client{Transport: tr}
	s := &dashboardStreams{g: g, public: client.New(base, "", hc), admin: client.New(base, admin, hc), tr: tr}
	s.ctx, s.cancel = context.WithCancel(ctx)
	return s
}

// openSeats starts every dashboard's seat half.
func (s *dashboardStreams) openSeats() {
	for i := range s.g.boards {
		s.wg.Go(func() { s.g.watchSeats(s.ctx, s.public, i) })
	}
}

// openLists starts every dashboard's list stream.
func (s *dashboardStreams) openLists() {
	for range s.g.boards {
		s.wg.Go(func() { s.g.watchList(s.ctx, s.admin) })
	}
}

// close closes every stream and waits until each reader ended.
func (s *dashboardStreams) close() {
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
		s.tr.CloseIdleConnections()
	})
}
