package onsale

import (
	"context"
	"crypto/rand"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/physiciansnet/capacityd"
)

// Ticket is a place as its holder sees it: where it stands, what is ahead
// of it, and when to ask again.
type Ticket struct {
	ActivityID           string     `json:"activity_id"`
	UserID               string     `json:"user_id"`
	State                State      `json:"state"`
	Position             *int64     `json:"position"`
	Ahead                *int64     `json:"ahead"`
	EstimatedWaitSeconds *int64     `json:"estimated_wait_seconds"`
	AdmissionToken       *string    `json:"admission_token"`
	TokenExpiresAt       *time.Time `json:"token_expires_at"`
	PollAfterMS          int64      `json:"poll_after_ms"`
}

// DefaultTick is how often the admission controller advances an active
// line when Options.Tick is zero.
const DefaultTick = 200 * time.Millisecond

// DefaultListEvery is how often every line with a queue is listed when
// Options.ListEvery is zero.
const DefaultListEvery = 30 * time.Second

// Options tune a Queue.
type Options struct {
	// Tick is how often the controller advances an active line (default
	// DefaultTick). Lines this instance does not serve are listed every
	// ListEvery (default DefaultListEvery): a line is advanced at every
	// tick by the instances that take its joins or polls, the listing
	// only picks up the lines of an instance that went away.
	Tick      time.Duration
	ListEvery time.Duration
	// PresenceFlush is how often the polls' presence is written to the
	// authority (default 2 s).
	PresenceFlush time.Duration
	Log           *slog.Logger
	Metrics       *Metrics
}

// Queue serves the admission queues of every activity: joins and polls,
// and (Run) the admission controller of this instance.
type Queue struct {
	auth Authority
	opts Options

	mu    sync.Mutex
	lines map[string]Line
	// places are the places as this instance last read them, with when it
	// last saw their holders ask; seen are the waiting places asked about
	// since the last presence flush.
	places map[placeKey]*cachedPlace
	seen   map[string]map[string]bool
	// hot are the lines to advance at every tick (joined or moving).
	hot map[string]bool
}

type placeKey struct{ activityID, userID string }

type cachedPlace struct {
	place   Place
	readAt  time.Time
	askedAt time.Time
	// used is the line's Used when the place was read: a token used since
	// may be this place's.
	used int64
}

// maxCachedPlaces bounds the places kept in memory; beyond it the cache
// starts afresh (its entries are only a shortcut to the authority).
const maxCachedPlaces = 500_000

// New returns a Queue over the authority.
func New(auth Authority, opts Options) *Queue {
	if opts.Tick <= 0 {
		opts.Tick = DefaultTick
	}
	if opts.ListEvery <= 0 {
		opts.ListEvery = DefaultListEvery
	}
	if opts.PresenceFlush <= 0 {
		opts.PresenceFlush = 2 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &Queue{auth: auth, opts: opts, lines: make(map[string]Line), places: make(map[placeKey]*cachedPlace),
		seen: make(map[string]map[string]bool), hot: make(map[string]bool)}
}

// Join takes the user's place in the activity's line (or returns the one
// the user holds) and answers it as a poll would.
func (q *Queue) Join(ctx context.Context, activityID, userID string) (Ticket, error) {
	p, err := q.auth.JoinQueue(ctx, activityID, userID)
	if err != nil {
		return Ticket{}, err
	}
	now := time.Now()
	q.mu.Lock()
	q.hot[activityID] = true
	q.remember(p, now)
	q.mu.Unlock()
	return q.answer(ctx, p, now)
}

// Me returns the user's place in the activity's line, or not_found if the
// user never joined it. It counts as the holder's presence. While the
// line's state does not say the place may have moved, it is answered from
// memory, without a round trip to the authority.
func (q *Queue) Me(ctx context.Context, activityID, userID string) (Ticket, error) {
	now := time.Now()
	key := placeKey{activityID, userID}
	q.mu.Lock()
	c := q.places[key]
	line, known := q.lines[activityID]
	fresh := c != nil && known && !q.stale(c, line, now)
	var cached Place
	if fresh {
		c.askedAt = now
		cached = c.place
		q.markSeen(cached)
	}
	q.mu.Unlock()
	if fresh {
		return q.answer(ctx, cached, now)
	}
	p, ok, err := q.auth.QueuePlace(ctx, activityID, userID)
	if err != nil {
		return Ticket{}, err
	}
	if !ok {
		return Ticket{}, capacityd.Errorf(capacityd.ENotFound, "user %s has no place in the queue of activity %s", userID, activityID)
	}
	q.mu.Lock()
	q.remember(p, now)
	q.markSeen(p)
	q.mu.Unlock()
	return q.answer(ctx, p, now)
}

// stale reports whether a cached place may have changed at the
// authority: the line admitted up to it, sold out, shuffled it, or expired
// it (an admission token past its deadline, or a place whose holder this
// instance has not seen for half the absence allowed, who may have asked
// another instance meanwhile); an admitted place is read again once the
// line counts a token used since it was read, and after a second at most
// (its token may have been used on another instance).
func (q *Queue) stale(c *cachedPlace, line Line, now time.Time) bool {
	p := c.place
	switch p.State {
	case Waiting:
		absent := time.Duration(line.Settings.AbsentSeconds) * time.Second
		return moved(p, line) || now.Sub(c.askedAt) > absent/2
	case Admitted:
		return line.Used != c.used || now.Sub(c.readAt) > time.Second || (p.TokenExpiresAt != nil && !now.Before(*p.TokenExpiresAt))
	}
	return now.Sub(c.readAt) > 10*time.Second
}

// remember caches a place as read from the authority; q.mu is held.
func (q *Queue) remember(p Place, now time.Time) {
	if len(q.places) >= maxCachedPlaces {
		q.places = make(map[placeKey]*cachedPlace)
	}
	q.places[placeKey{p.ActivityID, p.UserID}] = &cachedPlace{place: p, readAt: now, askedAt: now, used: q.lines[p.ActivityID].Used}
}

// Forget drops the user's place in the activity's line from this
// instance's memory, so that its next poll reads it from the authority: a
// signup here has just used the place's token, or was refused it (used on
// another instance, or expired).
func (q *Queue) Forget(activityID, userID string) {
	q.mu.Lock()
	delete(q.places, placeKey{activityID, userID})
	q.mu.Unlock()
}

// markSeen records a waiting place's holder's presence for the next flush;
// q.mu is held.
func (q *Queue) markSeen(p Place) {
	if p.State != Waiting {
		return
	}
	users := q.seen[p.ActivityID]
	if users == nil {
		users = make(map[string]bool)
		q.seen[p.ActivityID] = users
	}
	users[p.UserID] = true
}

// answer builds the ticket of a place from the line's state as this
// instance knows it (reading it from the authority when it knows none).
func (q *Queue) answer(ctx context.Context, p Place, now time.Time) (Ticket, error) {
	q.mu.Lock()
	line, ok := q.lines[p.ActivityID]
	q.mu.Unlock()
	if !ok {
		l, found, err := q.auth.QueueLine(ctx, p.ActivityID)
		if err != nil {
			return Ticket{}, err
		}
		if found {
			line = l
			q.mu.Lock()
			q.lines[p.ActivityID] = l
			q.hot[p.ActivityID] = true
			q.mu.Unlock()
		}
	}
	return ticketOf(p, line, now), nil
}

// ticketOf answers a place against its line's state.
func ticketOf(p Place, line Line, now time.Time) Ticket {
	t := Ticket{ActivityID: p.ActivityID, UserID: p.UserID, State: p.State, Position: p.Position}
	rate := max(1, line.Settings.AdmitPerSecond)
	longest := pollCap(line)
	switch p.State {
	case Waiting:
		if line.SoldOut {
			t.State = SoldOut
			t.PollAfterMS = jitter(longest)
			break
		}
		if p.Position == nil {
			t.PollAfterMS = untilOpening(line, now, longest)
			break
		}
		ahead := max(0, *p.Position-line.AdmittedThrough-1)
		if line.Head != nil {
			ahead = max(0, min(*p.Position-*line.Head, line.Waiting-1))
		}
		// The rate sets the polls: near the front, every second, for a
		// token used elsewhere may let the place in at any advance.
		wait := (ahead + int64(rate) - 1) / int64(rate)
		if line.OpensAt != nil && now.Before(*line.OpensAt) {
			wait += int64(line.OpensAt.Sub(now).Seconds())
		}
		t.PollAfterMS = jitter(min(longest, max(1000, wait*1000/3)))
		wait += behindTokens(ahead, line)
		t.Ahead, t.EstimatedWaitSeconds = &ahead, &wait
	case Admitted:
		if p.TokenExpiresAt != nil && !now.Before(*p.TokenExpiresAt) {
			t.State = Expired
			t.PollAfterMS = jitter(longest)
			break
		}
		t.AdmissionToken, t.TokenExpiresAt = p.Token, p.TokenExpiresAt
		t.PollAfterMS = jitter(5000)
	default:
		t.PollAfterMS = jitter(longest)
	}
	return t
}

// untilOpening is the poll delay of a place without a position: a moment
// in the first second after the opening (spread, so that a large line's
// polls do not arrive in lockstep), or sooner when the opening is further
// away than a holder may stay unseen.
func untilOpening(line Line, now time.Time, longest int64) int64 {
	until := int64(0)
	if line.OpensAt != nil {
		until = max(0, line.OpensAt.Sub(now).Milliseconds())
	}
	if d := jitter(longest); d < until {
		return d
	}
	return until + 1 + mrand.Int64N(1000)
}

// behindTokens is the seconds a place with ahead places before it waits,
// besides the rate, for tokens out to come back (used or lapsed): none
// while it is within the cap's free room; beyond it, the line moves only
// as tokens come back, which takes up to token_seconds.
func behindTokens(ahead int64, line Line) int64 {
	if ahead < int64(line.Settings.MaxAdmitted)-line.TokensOut {
		return 0
	}
	return int64(line.Settings.TokenSeconds)
}

// pollCap is the longest a waiting holder may wait between polls and still
// keep the place: a third of the absence allowed.
func pollCap(line Line) int64 {
	return max(1000, int64(line.Settings.AbsentSeconds)*1000/3)
}

// jitter spreads a poll delay over ±20 %, so that many holders told the
// same delay do not come back in lockstep.
func jitter(ms int64) int64 {
	return ms*8/10 + mrand.Int64N(ms*4/10+1)
}

// Run advances the lines until ctx ends: every tick the active lines,
// every ListEvery every line with a queue; and it writes the polls'
// presence every PresenceFlush.
func (q *Queue) Run(ctx context.Context) {
	tick := time.NewTicker(q.opts.Tick)
	defer tick.Stop()
	flushEvery := max(1, int(q.opts.PresenceFlush/q.opts.Tick))
	listEvery := max(1, int(q.opts.ListEvery/q.opts.Tick))
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			q.flushPresence(context.WithoutCancel(ctx))
			return
		case <-tick.C:
		}
		if n%listEvery == 0 {
			ids, err := q.auth.ActiveQueues(ctx)
			if err != nil {
				q.opts.Log.Warn("admission queues not listed", "err", err)
			}
			q.mu.Lock()
			for _, id := range ids {
				q.hot[id] = true
			}
			q.mu.Unlock()
		}
		q.advanceHot(ctx)
		if n%flushEvery == 0 {
			q.flushPresence(ctx)
		}
	}
}

// advanceHot advances every hot line once; a line with nobody waiting,
// no token out and no place left to position cools down until the next
// listing or join.
func (q *Queue) advanceHot(ctx context.Context) {
	q.mu.Lock()
	ids := make([]string, 0, len(q.hot))
	for id := range q.hot {
		ids = append(ids, id)
	}
	q.mu.Unlock()
	for _, id := range ids {
		adv, err := q.auth.AdvanceQueue(ctx, id, cryptoShuffle)
		if err != nil {
			if ctx.Err() == nil {
				q.opts.Log.Warn("admission queue not advanced", "activity_id", id, "err", err)
			}
			continue
		}
		q.opts.Metrics.observe(adv)
		q.mu.Lock()
		prev, known := q.lines[id]
		q.lines[id] = adv.Line
		// A line that no longer has a queue, or that nobody waits in and
		// no token is out of, cools down.
		if adv.Line.Settings.AdmitPerSecond == 0 || (adv.Line.Shuffled && adv.Line.Waiting == 0 && adv.Line.TokensOut == 0) {
			delete(q.hot, id)
		}
		q.mu.Unlock()
		if known && (adv.Line.Shuffled != prev.Shuffled || adv.Line.AdmittedThrough != prev.AdmittedThrough ||
			adv.Line.SoldOut != prev.SoldOut || adv.Line.Used != prev.Used) {
			q.refreshMoved(ctx, adv.Line, adv.Line.Used != prev.Used)
		}
	}
	q.mu.Lock()
	q.opts.Metrics.setTotals(q.lines)
	q.mu.Unlock()
}

// maxRefresh bounds the places one refresh reads.
const maxRefresh = 10_000

// refreshMoved reads again, in one statement, the cached waiting places
// of a line that the line's last advance may have moved (shuffled,
// admitted or sold out), and its cached admitted places when a token was
// used since (usedMoved), so that their next polls are answered from
// memory rather than each reading its place.
func (q *Queue) refreshMoved(ctx context.Context, line Line, usedMoved bool) {
	q.mu.Lock()
	var users []string
	for k, c := range q.places {
		if k.activityID == line.ActivityID && len(users) < maxRefresh && (moved(c.place, line) || (usedMoved && c.place.State == Admitted)) {
			users = append(users, k.userID)
		}
	}
	q.mu.Unlock()
	if len(users) == 0 {
		return
	}
	places, err := q.auth.QueuePlaces(ctx, line.ActivityID, users)
	if err != nil {
		if ctx.Err() == nil {
			q.opts.Log.Warn("queue places not refreshed", "activity_id", line.ActivityID, "err", err)
		}
		return
	}
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range places {
		if c := q.places[placeKey{p.ActivityID, p.UserID}]; c != nil {
			c.place, c.readAt, c.used = p, now, line.Used
		}
	}
}

// moved reports whether a line's advance may have moved a waiting place:
// shuffled it, admitted up to it, or sold out.
func moved(p Place, line Line) bool {
	return p.State == Waiting && ((p.Position == nil && line.Shuffled) ||
		(p.Position != nil && *p.Position <= line.AdmittedThrough) || line.SoldOut)
}

// flushPresence writes the presence of the holders seen since the last
// flush.
func (q *Queue) flushPresence(ctx context.Context) {
	q.mu.Lock()
	seen := q.seen
	q.seen = make(map[string]map[string]bool)
	q.mu.Unlock()
	for id, users := range seen {
		list := make([]string, 0, len(users))
		for u := range users {
			list = append(list, u)
		}
		if err := q.auth.TouchPlaces(ctx, id, list); err != nil && ctx.Err() == nil {
			q.opts.Log.Warn("queue presence not recorded", "activity_id", id, "err", err)
		}
	}
}

// cryptoShuffle returns a uniformly random permutation of 0..n-1 from a
// generator seeded by the operating system's cryptographic source.
func cryptoShuffle(n int) []int {
	var seed [32]byte
	_, _ = rand.Read(seed[:]) // crypto/rand.Read never fails (Go 1.24+)
	r := mrand.New(mrand.NewChaCha8(seed))
	return r.Perm(n)
}
