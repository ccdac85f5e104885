package stream

import (
	"context"
	"sync"
	"time"

	"github.com/physiciansnet/capacityd"
)

// Watcher tells its caller when an id's value was announced as changed,
// on any instance; the returned func stops the watch. Notifier is one: it
// also pokes every watcher on a timer while announcements may be missed.
type Watcher interface {
	Watch(id string) (<-chan struct{}, func())
}

// ReadFunc reads the current value of id from the authority.
type ReadFunc[T any] func(ctx context.Context, id string) (T, error)

// Shared lets the many readers of one instance follow values that live in
// the database (a check-in list's counts, shown on every dashboard and
// door of the list): the value of an id is read once when its first
// follower comes, then once per announced change (coalesced), whatever
// the number of followers, and a follower that joins a value already
// followed reads nothing. An id stays followed for a while after its last
// follower left (linger), so that the reconnections of pages that reload
// or move on read nothing either.
type Shared[T any] struct {
	changes  Watcher
	read     ReadFunc[T]
	same     func(a, b T) bool
	coalesce time.Duration
	linger   time.Duration

	mu     sync.Mutex
	topics map[string]*sharedTopic[T]
}

// sharedTopic is one followed id of this instance.
type sharedTopic[T any] struct {
	id    string
	ready chan struct{} // closed once the first read is done (err set if it failed)
	err   error
	stop  chan struct{} // closed when the last follower leaves
	last  T
	subs  map[*Follower[T]]struct{}
	// idle ends the topic once it has had no follower for linger.
	idle *time.Timer
	// changed signals the announced changes of id. dirty is set from the
	// moment the topic takes one until the read after it; fresh is closed
	// (and replaced) at the end of each such read.
	changed <-chan struct{}
	dirty   bool
	fresh   chan struct{}
}

// Follower is one reader's view of an id's value.
type Follower[T any] struct {
	shared  *Shared[T]
	topic   *sharedTopic[T]
	initial T
	updates chan T
	done    chan struct{}
	once    sync.Once
}

// NewShared returns a Shared that reads with read, wakes on changes'
// announcements, sends a follower a value only when same says it differs
// from the last one sent, reads at most once per coalesce, and follows an
// id for linger after its last follower left.
func NewShared[T any](changes Watcher, read ReadFunc[T], same func(a, b T) bool, coalesce, linger time.Duration) *Shared[T] {
	return &Shared[T]{changes: changes, read: read, same: same, coalesce: coalesce, linger: linger,
		topics: make(map[string]*sharedTopic[T])}
}

// Follow starts following id. Its Initial value is current (read now, or
// the value this instance already follows, kept current by the
// announcements); an error is the first read's (a not_found one when id
// does not exist). Close the follower when done.
func (s *Shared[T]) Follow(ctx context.Context, id string) (*Follower[T], error) {
	s.mu.Lock()
	t := s.topics[id]
	if t == nil {
		t = &sharedTopic[T]{id: id, ready: make(chan struct{}), stop: make(chan struct{}),
			subs: make(map[*Follower[T]]struct{}), fresh: make(chan struct{})}
		s.topics[id] = t
		// Watch before the first read, so that no change after it is missed.
		changed, unwatch := s.changes.Watch(id)
		t.changed = changed
		go s.run(t, changed, unwatch)
	}
	if t.idle != nil {
		t.idle.Stop() // if it already fired, it finds this follower and leaves the topic be
		t.idle = nil
	}
	f := &Follower[T]{shared: s, topic: t, updates: make(chan T, 1), done: make(chan struct{})}
	t.subs[f] = struct{}{}
	s.mu.Unlock()

	select {
	case <-t.ready:
	case <-ctx.Done():
		f.Close()
		return nil, ctx.Err()
	}
	if t.err != nil {
		f.Close()
		return nil, t.err
	}
	s.mu.Lock()
	// A change announced and not read yet (one made just before, through
	// this instance perhaps): wait for its read rather than start stale;
	// for at most two reads (one in flight may have begun before it), so
	// that a list that changes all the time starves nobody.
	for waits := 0; waits < 2 && (t.dirty || len(t.changed) > 0) && t.err == nil; waits++ {
		fresh := t.fresh
		s.mu.Unlock()
		select {
		case <-fresh:
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
	f.initial = t.last
	gone := t.err
	s.mu.Unlock()
	if gone != nil {
		f.Close()
		return nil, gone
	}
	return f, nil
}

// Initial is the value when the follower joined.
func (f *Follower[T]) Initial() T { return f.initial }

// Updates delivers the values that follow Initial. A follower that falls
// behind misses intermediate values, never the latest.
func (f *Follower[T]) Updates() <-chan T { return f.updates }

// Done is closed when the value is gone (its id no longer exists).
func (f *Follower[T]) Done() <-chan struct{} { return f.done }

// Close stops following. It is safe to call more than once.
func (f *Follower[T]) Close() {
	s := f.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	f.end()
	if t := f.topic; len(t.subs) == 0 && s.topics[t.id] == t && t.idle == nil {
		t.idle = time.AfterFunc(s.linger, func() { s.endIdle(t) })
	}
}

// endIdle ends t if it still has no follower.
func (s *Shared[T]) endIdle(t *sharedTopic[T]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(t.subs) == 0 && s.topics[t.id] == t {
		delete(s.topics, t.id)
		close(t.stop)
	}
}

// end takes f out of its topic. s.mu is held.
func (f *Follower[T]) end() {
	delete(f.topic.subs, f)
	f.once.Do(func() { close(f.done) })
}

// run reads t's value first, then after each announced change (at most
// once per coalesce), until its last follower leaves. A failed first read
// ends the topic; a later read that fails is tried again at the next
// change, and a not_found one ends every follower.
func (s *Shared[T]) run(t *sharedTopic[T], changed <-chan struct{}, unwatch func()) {
	defer unwatch()
	v, err := s.readOnce(t.id)
	s.mu.Lock()
	t.last, t.err = v, err
	if err != nil && s.topics[t.id] == t {
		delete(s.topics, t.id) // the next follower reads again
	}
	s.mu.Unlock()
	close(t.ready)
	if err != nil {
		return
	}
	for {
		select {
		case <-t.stop:
			return
		case <-changed:
		}
		s.mu.Lock()
		t.dirty = true
		s.mu.Unlock()
		timer := time.NewTimer(s.coalesce)
		select {
		case <-t.stop:
			timer.Stop()
			return
		case <-timer.C:
		}
		// Changes announced until now are covered by the read below.
		select {
		case <-changed:
		default:
		}
		v, err := s.readOnce(t.id)
		if err != nil && capacityd.ErrorCode(err) == capacityd.ENotFound {
			s.endAll(t, err)
			return
		}
		s.publish(t, v, err)
	}
}

func (s *Shared[T]) readOnce(id string) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	return s.read(ctx, id)
}

// publish ends a read after a change: it hands v (unless the read failed
// with err, to be tried again at the next change) to every follower of t
// when it differs from the last value, replacing an update a follower
// has not taken yet, and wakes the followers waiting for a fresh value.
func (s *Shared[T]) publish(t *sharedTopic[T], v T, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.dirty = false
	close(t.fresh)
	t.fresh = make(chan struct{})
	if err != nil || s.same(t.last, v) {
		return
	}
	t.last = v
	for f := range t.subs {
		select {
		case <-f.updates:
		default:
		}
		f.updates <- v
	}
}

// endAll ends every follower of t, whose id is gone (err).
func (s *Shared[T]) endAll(t *sharedTopic[T], err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.err, t.dirty = err, false
	close(t.fresh)
	for f := range t.subs {
		f.end()
	}
	if s.topics[t.id] == t {
		delete(s.topics, t.id)
	}
}
