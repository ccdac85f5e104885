package capacity

import (
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/physiciansnet/capacityd/internal/lru"
	"github.com/physiciansnet/capacityd/registration"
)

// DefaultMemorySize is the most activities (and as many pools) whose seats
// an instance keeps in memory.
const DefaultMemorySize = 10000

// SeatChange is what an announcement of a seat change carries between
// instances: the activity's seats at the authority right after a commit
// (nil when the activity itself did not change: a pool of it did), and
// the states of the pools the commit moved. A receiver updates its memory
// from it without reading Redis.
type SeatChange struct {
	ActivityID string          `json:"a"`
	Activity   *ActivitySeats  `json:"s,omitempty"`
	Pools      []PoolSeatsSeen `json:"p,omitempty"`
}

// ActivitySeats is an activity's seats at the authority as of Seq, and of
// its settings as of Version (its updated_at in unix microseconds). Prev
// is the seq the activity had before the commit: a receiver whose entry
// is older than Prev missed an announcement.
type ActivitySeats struct {
	Prev     int64    `json:"q"`
	Seq      int64    `json:"n"`
	Version  int64    `json:"v"`
	Capacity int      `json:"c"`
	Taken    int      `json:"t"`
	Waiting  int      `json:"w"`
	Reserved int      `json:"r"`
	Pools    []string `json:"p,omitempty"`
}

// PoolSeatsSeen is a pool's seats at the authority as of Seq (every
// transaction that moves the pool moves its seq by one) and of its
// capacity as of Version.
type PoolSeatsSeen struct {
	PoolID   string `json:"id"`
	Seq      int64  `json:"n"`
	Version  int64  `json:"v"`
	Capacity int    `json:"c"`
	Taken    int    `json:"t"`
	Reserved int    `json:"r"`
}

// room returns the seats' room, for registration.NewCounts.
func (a ActivitySeats) room() registration.Room {
	return registration.Room{Capacity: a.Capacity, Taken: a.Taken, Reserved: a.Reserved}
}

// Encode returns the change's wire form.
func (c SeatChange) Encode() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// DecodeSeatChange reads an announcement's payload: the wire form of a
// SeatChange, or a bare activity id (an announcement that carries no
// state: a correction, an invalidation); ok is false for a payload that
// is neither.
func DecodeSeatChange(payload string) (c SeatChange, ok bool) {
	if payload == "" || payload[0] != '{' {
		return SeatChange{ActivityID: payload}, payload != ""
	}
	if err := json.Unmarshal([]byte(payload), &c); err != nil || c.ActivityID == "" {
		return SeatChange{}, false
	}
	return c, true
}

// SeatChanges returns the announcements of a change transaction's
// commits: one for each activity that changed (with its new seats and
// its pools'), and one for each other activity of a pool that moved (with
// that pool's new seats), each activity once. A pool's own change (a
// commit without an activity) announces its activities.
func SeatChanges(commits []registration.Commit) []SeatChange {
	var out []SeatChange
	at := make(map[string]int)
	add := func(id string) *SeatChange {
		i, ok := at[id]
		if !ok {
			i = len(out)
			at[id] = i
			out = append(out, SeatChange{ActivityID: id})
		}
		return &out[i]
	}
	for _, c := range commits {
		if c.Failed || (c.ActivityID != "" && len(c.Events) == 0 && !c.ActivityChanged) {
			continue
		}
		pools := poolsSeenOf(c.Pools)
		if c.ActivityID != "" {
			ch := add(c.ActivityID)
			ch.Activity = activitySeen(c)
			ch.Pools = mergePools(ch.Pools, pools)
		}
		for i, p := range c.Pools {
			for _, id := range p.Activities {
				if id != c.ActivityID {
					ch := add(id)
					ch.Pools = mergePools(ch.Pools, pools[i:i+1])
				}
			}
		}
	}
	return out
}

// activitySeen is the activity's part of a commit's announcement.
func activitySeen(c registration.Commit) *ActivitySeats {
	prev := c.State.LastSeq
	if len(c.Events) > 0 {
		prev = c.Events[0].Seq - 1
	}
	return stateSeen(c.State, prev)
}

// stateSeen is an activity's state at the authority as a change whose
// previous seq is prev.
func stateSeen(st registration.SeatState, prev int64) *ActivitySeats {
	ids := make([]string, len(st.Pools))
	for i, p := range st.Pools {
		ids[i] = p.PoolID
	}
	slices.Sort(ids)
	return &ActivitySeats{Prev: prev, Seq: st.LastSeq, Version: st.UpdatedAt.UnixMicro(), Capacity: st.Capacity,
		Taken: st.Taken, Waiting: st.Waiting, Reserved: st.Reserved, Pools: slices.Compact(ids)}
}

// poolsSeenOf returns the pool states as announced.
func poolsSeenOf(ps []registration.PoolSeatState) []PoolSeatsSeen {
	out := make([]PoolSeatsSeen, len(ps))
	for i, p := range ps {
		out[i] = poolSeen(p)
	}
	return out
}

func poolSeen(p registration.PoolSeatState) PoolSeatsSeen {
	return PoolSeatsSeen{PoolID: p.PoolID, Seq: p.LastSeq, Version: p.UpdatedAt.UnixMicro(), Capacity: p.Capacity,
		Taken: p.Taken, Reserved: p.Reserved}
}

// mergePools adds the pool states of more to have, keeping the newest of
// each pool.
func mergePools(have, more []PoolSeatsSeen) []PoolSeatsSeen {
	for _, p := range more {
		i := slices.IndexFunc(have, func(h PoolSeatsSeen) bool { return h.PoolID == p.PoolID })
		switch {
		case i < 0:
			have = append(have, p)
		case p.Seq > have[i].Seq || (p.Seq == have[i].Seq && p.Version > have[i].Version):
			have[i] = p
		}
	}
	return have
}

// memEntry is one remembered activity or pool: its seats (a pool's have
// no waiting and no pools), when it must be read again, and whether it
// may be shown (an invalid entry only remembers the newest seq announced).
type memEntry struct {
	seats   ActivitySeats
	expires time.Time
	valid   bool
}

// Memory is an instance's copy of the seats of the activities (and pools)
// it read recently, so that a warm activity's seats are read without a
// round trip. It holds the authority's numbers as of a seq, updated from
// the announcements of every commit (SeatChange) and from this instance's
// own commits; a change that arrives after a missed one (a seq gap), an
// announcement without state, or a lost subscription drops what it
// concerns, and every entry expires on its own lifetime after it was read
// from Redis or announced first, whatever updates it got since. It is
// safe for concurrent use.
type Memory struct {
	life time.Duration
	now  func() time.Time

	mu    sync.Mutex
	epoch uint64 // moves at every Forget: fills read before it are dropped
	acts  *lru.Cache[string, *memEntry]
	pools *lru.Cache[string, *memEntry]
}

// NewMemory returns a Memory of at most size activities and size pools,
// whose entries live for life (zero or less: DefaultTTL, a counter's
// default lifetime).
func NewMemory(size int, life time.Duration, now func() time.Time) *Memory {
	if size <= 0 {
		size = DefaultMemorySize
	}
	if life <= 0 {
		life = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Memory{life: life, now: now, epoch: 1, acts: lru.New[string, *memEntry](size), pools: lru.New[string, *memEntry](size)}
}

// Epoch returns the memory's epoch, to pass to Fill.
func (m *Memory) Epoch() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

// Forget drops everything: announcements may have been missed.
func (m *Memory) Forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
	m.acts = lru.New[string, *memEntry](m.acts.Cap())
	m.pools = lru.New[string, *memEntry](m.pools.Cap())
}

// Seats returns the activity's seat display from memory; ok is false
// unless the activity and each of its pools are remembered and fresh.
func (m *Memory) Seats(activityID string) (registration.Seats, bool) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.acts.Get(activityID)
	if !ok || !e.valid || !now.Before(e.expires) {
		return registration.Seats{}, false
	}
	a := e.seats
	counts := registration.NewCounts(a.room(), a.Waiting, false, "", []registration.Room(nil))
	for _, id := range a.Pools {
		p, ok := m.pools.Get(id)
		if !ok || !p.valid || !now.Before(p.expires) {
			return registration.Seats{}, false
		}
		counts = counts.Within(p.seats.room())
	}
	return newSeats(activityID, counts, registration.SourceCache, now), true
}

// Fill remembers what a read of Redis (or of the authority) found, for
// no longer than life (the time the counters read have left to live) nor
// the memory's lifetime, unless the memory was forgotten since epoch or
// already holds something newer.
func (m *Memory) Fill(epoch uint64, activityID string, a *ActivitySeats, pools []PoolSeatsSeen, life time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch != m.epoch {
		return
	}
	life = min(life, m.life)
	m.putActivity(activityID, *a, life)
	for _, p := range pools {
		m.putPool(p, life)
	}
}

// Apply updates the memory from an announced change.
func (m *Memory) Apply(c SeatChange) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.Activity == nil && len(c.Pools) == 0 {
		m.invalidate(m.acts, c.ActivityID) // a change it does not carry: read it again
		return
	}
	if c.Activity != nil {
		m.putActivity(c.ActivityID, *c.Activity, announced)
	}
	for _, p := range c.Pools {
		m.putPool(p, announced)
	}
}

// announced is the life argument of an announced change: the memory's
// lifetime for a new entry, and a seq gap invalidates an entry.
const announced time.Duration = -1

// putActivity merges an activity's seats into its entry (see put).
// Called with m.mu held.
func (m *Memory) putActivity(id string, a ActivitySeats, life time.Duration) {
	m.put(m.acts, id, a, life)
}

// putPool merges a pool's seats into its entry (see put). A pool's seq
// moves by one per transaction that moves it: an announced seq more than
// one past the entry's is a gap. Called with m.mu held.
func (m *Memory) putPool(p PoolSeatsSeen, life time.Duration) {
	m.put(m.pools, p.PoolID, ActivitySeats{Prev: p.Seq - 1, Seq: p.Seq, Version: p.Version, Capacity: p.Capacity,
		Taken: p.Taken, Reserved: p.Reserved}, life)
}

// put merges seats into the entry of id in cache: the counts when their
// seq is newer, the settings when their version is. A new entry lives for
// life (announced: the memory's lifetime; a state is whole, so an
// announcement makes an entry as well as a read does). An announced
// change whose Prev is newer than the entry's seq follows a change the
// entry missed: the entry is invalidated, keeping the announced seq, and
// only a read (Fill) at that seq or later makes it valid again, so that
// neither an older announcement arriving late nor a read of Redis begun
// before it brings an old state back. Called with m.mu held.
func (m *Memory) put(cache *lru.Cache[string, *memEntry], id string, a ActivitySeats, life time.Duration) {
	now := m.now()
	e, ok := cache.Peek(id)
	if !ok || !now.Before(e.expires) {
		if life > 0 || life == announced {
			cache.Add(id, &memEntry{seats: a, expires: m.expiry(life), valid: true})
		}
		return
	}
	if !e.valid {
		if life != announced && a.Seq >= e.seats.Seq {
			cache.Add(id, &memEntry{seats: a, expires: m.expiry(life), valid: true})
		} else if a.Seq > e.seats.Seq {
			cache.Add(id, &memEntry{seats: a, expires: e.expires})
		}
		return
	}
	if life == announced && a.Prev > e.seats.Seq {
		cache.Add(id, &memEntry{seats: a, expires: e.expires})
		return
	}
	next := e.seats
	newer := false
	if a.Seq > next.Seq {
		next.Seq, next.Taken, next.Waiting, next.Reserved, newer = a.Seq, a.Taken, a.Waiting, a.Reserved, true
	}
	if a.Version > next.Version {
		next.Version, next.Capacity, newer = a.Version, a.Capacity, true
	}
	if newer {
		next.Pools = a.Pools
		cache.Add(id, &memEntry{seats: next, expires: e.expires, valid: true})
	}
}

// invalidate marks the entry of id as to be read again. Called with m.mu
// held.
func (m *Memory) invalidate(cache *lru.Cache[string, *memEntry], id string) {
	if e, ok := cache.Peek(id); ok && e.valid {
		cache.Add(id, &memEntry{seats: e.seats, expires: e.expires})
	}
}

// expiry returns when an entry made now for life ends.
func (m *Memory) expiry(life time.Duration) time.Time {
	if life == announced {
		life = m.life
	}
	return m.now().Add(life)
}
