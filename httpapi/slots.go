package httpapi

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Per-client caps on what a client holds open at once.
const (
	// DefaultStreamsPerAddress is the most seat streams one client address
	// holds open on an instance: a few dozen, for the many browsers a
	// hospital or campus shows behind one NAT address.
	DefaultStreamsPerAddress = 32
	// DefaultEventWaitsPerUser is the most event feed long polls (wait of
	// 1 s or more) one admin holds open on an instance.
	DefaultEventWaitsPerUser = 8

	// slotRetryAfter is the Retry-After of a refusal at a cap: a slot frees
	// when one of the client's own streams or polls ends, which no clock
	// predicts.
	slotRetryAfter = 5 * time.Second
)

// slots counts what each client key holds open at once (seat streams per
// client address, long polls per admin) and refuses a key at its cap. A key
// that holds nothing is forgotten, so its memory is bounded by what is
// open. Taking and giving back are under one lock: the count is exact
// however many requests come and go at once.
type slots struct {
	max     int
	refused prometheus.Counter

	mu   sync.Mutex
	held map[string]int
}

func newSlots(max int, refused prometheus.Counter) *slots {
	return &slots{max: max, refused: refused, held: make(map[string]int)}
}

// acquire takes one of key's slots. It returns false when key already holds
// max, and otherwise the function that gives the slot back (safe to call
// more than once; only the first call counts).
func (s *slots) acquire(key string) (release func(), ok bool) {
	s.mu.Lock()
	if s.held[key] >= s.max {
		s.mu.Unlock()
		s.refused.Inc()
		return nil, false
	}
	s.held[key]++
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { s.release(key) }) }, true
}

func (s *slots) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.held[key] - 1; n > 0 {
		s.held[key] = n
	} else {
		delete(s.held, key)
	}
}

// clients returns how many keys hold at least one slot.
func (s *slots) clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// holding returns how many slots key holds.
func (s *slots) holding(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[key]
}
