package httpapi

import (
	"sync"
	"time"

	"github.com/physiciansnet/capacityd/internal/lru"
)

// DefaultWaterWindow is how long a client address waits between two waters
// of one note by default.
const DefaultWaterWindow = 60 * time.Second

// maxWaterEntries bounds the (address, note) pairs the water limit
// remembers. Past it the oldest is forgotten, which lets that address water
// that note again early: one extra water per maxWaterEntries waters of
// others, far fewer than the waters it takes to get there.
const maxWaterEntries = 100_000

// waterKey is one client address's waters of one note.
type waterKey struct{ addr, noteID string }

// waterLimit allows one water per client address per note per window.
//
// Its state is in memory, per instance, bounded (lru): with n instances
// behind a load balancer an address may water a note up to n times per
// window. That bound is enough for a like counter, and it keeps Redis off
// the path of a water (Redis is optional, and an outage of it would
// otherwise have to choose between refusing all waters and limiting none).
type waterLimit struct {
	window time.Duration
	now    func() time.Time

	mu   sync.Mutex
	seen *lru.Cache[waterKey, time.Time] // -> when the water was allowed
}

func newWaterLimit(window time.Duration, maxEntries int, now func() time.Time) *waterLimit {
	return &waterLimit{window: window, now: now, seen: lru.New[waterKey, time.Time](maxEntries)}
}

// take allows one water of noteID by addr and returns the time it was
// taken at (for give), or false and how long until the next is allowed.
func (w *waterLimit) take(addr, noteID string) (at time.Time, ok bool, wait time.Duration) {
	k := waterKey{addr, noteID}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	// Entries are stamped in time order: the expired ones are at the back.
	w.seen.DropOldestWhile(func(_ waterKey, t time.Time) bool { return now.Sub(t) >= w.window })
	if t, found := w.seen.Peek(k); found && now.Sub(t) < w.window {
		return time.Time{}, false, w.window - now.Sub(t)
	}
	w.seen.Add(k, now)
	return now, true, 0
}

// give returns a water taken at at that was not counted (the increment
// failed), so that the address may water the note again at once.
func (w *waterLimit) give(addr, noteID string, at time.Time) {
	k := waterKey{addr, noteID}
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, found := w.seen.Peek(k); found && t.Equal(at) {
		w.seen.Remove(k)
	}
}

// size returns the pairs remembered.
func (w *waterLimit) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen.Len()
}
