package settingscache

import (
	"time"

	"github.com/physiciansnet/capacityd/internal/lru"
)

// bounded is a map of entries that expire, of at most max entries (an
// lru.Cache): putting into a full map first drops the expired entries at
// the least recently used end, then the least recently used one. Not safe
// for concurrent use.
type bounded[V any] struct {
	entries *lru.Cache[string, entry[V]]
}

type entry[V any] struct {
	v     V
	until time.Time
}

func newBounded[V any](max int) *bounded[V] {
	return &bounded[V]{entries: lru.New[string, entry[V]](max)}
}

// get returns the entry of key if it has not expired at now.
func (b *bounded[V]) get(key string, now time.Time) (V, bool) {
	e, ok := b.entries.Get(key)
	if !ok || !now.Before(e.until) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// put sets the entry of key until until, making room if the map is full.
func (b *bounded[V]) put(key string, v V, until, now time.Time) {
	if b.entries.Len() >= b.entries.Cap() {
		b.entries.DropOldestWhile(func(_ string, e entry[V]) bool { return !now.Before(e.until) })
	}
	b.entries.Add(key, entry[V]{v: v, until: until})
}

func (b *bounded[V]) remove(key string) { b.entries.Remove(key) }

// len returns the number of entries, expired ones included.
func (b *bounded[V]) len() int { return b.entries.Len() }
