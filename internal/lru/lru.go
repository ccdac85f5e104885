// Package lru is a bounded map that forgets its least recently used entry
// when full: the memory of per-client state (rate limits, one water per
// address and note) and of caches (activities, unknown ids) stays bounded
// however many clients come.
//
// A Cache is not safe for concurrent use; its owner holds a lock around it.
// The standard library's container/list keeps the order, so the package
// adds no dependency.
package lru

import "container/list"

// Cache maps keys to values, at most Cap of them. Get and Add make an
// entry the most recently used; Peek does not.
type Cache[K comparable, V any] struct {
	cap     int
	order   *list.List // of *entry[K, V], most recently used at the front
	entries map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key K
	val V
}

// New returns an empty Cache of at most capacity entries (at least 1).
func New[K comparable, V any](capacity int) *Cache[K, V] {
	capacity = max(1, capacity)
	return &Cache[K, V]{cap: capacity, order: list.New(), entries: make(map[K]*list.Element)}
}

// Cap returns the most entries the cache holds.
func (c *Cache[K, V]) Cap() int { return c.cap }

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int { return len(c.entries) }

// Get returns the value of key and makes it the most recently used.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	el, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[K, V]).val, true
}

// Peek returns the value of key without changing the order.
func (c *Cache[K, V]) Peek(key K) (V, bool) {
	el, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	return el.Value.(*entry[K, V]).val, true
}

// Add sets the value of key and makes it the most recently used. When a new
// key finds the cache full, the least recently used entry is dropped first;
// evicted reports whether one was.
func (c *Cache[K, V]) Add(key K, val V) (evicted bool) {
	if el, ok := c.entries[key]; ok {
		el.Value.(*entry[K, V]).val = val
		c.order.MoveToFront(el)
		return false
	}
	if len(c.entries) >= c.cap {
		c.RemoveOldest()
		evicted = true
	}
	c.entries[key] = c.order.PushFront(&entry[K, V]{key: key, val: val})
	return evicted
}

// Remove drops key, if present.
func (c *Cache[K, V]) Remove(key K) {
	if el, ok := c.entries[key]; ok {
		c.order.Remove(el)
		delete(c.entries, key)
	}
}

// Oldest returns the least recently used entry, if any.
func (c *Cache[K, V]) Oldest() (K, V, bool) {
	el := c.order.Back()
	if el == nil {
		var k K
		var v V
		return k, v, false
	}
	e := el.Value.(*entry[K, V])
	return e.key, e.val, true
}

// RemoveOldest drops the least recently used entry, if any.
func (c *Cache[K, V]) RemoveOldest() {
	if el := c.order.Back(); el != nil {
		c.order.Remove(el)
		delete(c.entries, el.Value.(*entry[K, V]).key)
	}
}

// DropOldestWhile drops least recently used entries while drop says so of
// the oldest, and returns how many it dropped. When entries are used in
// time order (each Get or Add stamps a time), this drops the stale ones
// from the back and stops at the first fresh one.
func (c *Cache[K, V]) DropOldestWhile(drop func(key K, val V) bool) int {
	n := 0
	for {
		k, v, ok := c.Oldest()
		if !ok || !drop(k, v) {
			return n
		}
		c.RemoveOldest()
		n++
	}
}
