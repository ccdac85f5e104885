package activitycache

import "time"

// sweepEvery is the least time between two sweeps of a full map for
// expired entries.
const sweepEvery = time.Second

// bounded is a map of entries that expire, of at most max entries: a full
// map first drops its expired entries (at most once per sweepEvery), then
// arbitrary ones. Not safe for concurrent use.
type bounded[V any] struct {
	max       int
	entries   map[string]entry[V]
	lastSweep time.Time
}

type entry[V any] struct {
	v     V
	until time.Time
}

func newBounded[V any](max int) *bounded[V] {
	return &bounded[V]{max: max, entries: make(map[string]entry[V])}
}

// get returns the entry of key if it has not expired at now.
func (b *bounded[V]) get(key string, now time.Time) (V, bool) {
	e, ok := b.entries[key]
	if !ok || !now.Before(e.until) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// put sets the entry of key until until, making room if the map is full.
func (b *bounded[V]) put(key string, v V, until, now time.Time) {
	if _, ok := b.entries[key]; !ok && len(b.entries) >= b.max {
		if now.Sub(b.lastSweep) >= sweepEvery {
			b.lastSweep = now
			for k, e := range b.entries {
				if !now.Before(e.until) {
					delete(b.entries, k)
				}
			}
		}
		for k := range b.entries {
			if len(b.entries) < b.max {
				break
			}
			delete(b.entries, k)
		}
	}
	b.entries[key] = entry[V]{v: v, until: until}
}

func (b *bounded[V]) remove(key string) { delete(b.entries, key) }

// len returns the number of entries, expired ones included.
func (b *bounded[V]) len() int { return len(b.entries) }
