package note

import (
	"sync"
	"time"

	"github.com/physiciansnet/capacityd/internal/lru"
)

// unknownTTL is how long an id found unregistered is answered not_found
// without asking the authority again. It is also how long a note
// registered through another instance may still be refused by this one.
const unknownTTL = 5 * time.Second

// maxUnknownIDs bounds the unregistered ids remembered; past it the least
// recently found is forgotten (and costs one query more if it comes back).
const maxUnknownIDs = 10_000

// unknownIDs is a short-lived negative cache of the ids that Registered
// mode found unregistered, per instance, bounded in size.
type unknownIDs struct {
	now func() time.Time
	mu  sync.Mutex
	ids *lru.Cache[string, time.Time] // id -> when found unknown
}

func newUnknownIDs(now func() time.Time) *unknownIDs {
	return &unknownIDs{now: now, ids: lru.New[string, time.Time](maxUnknownIDs)}
}

// has reports whether id was found unknown less than unknownTTL ago.
func (u *unknownIDs) has(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	u.dropStale(now)
	at, ok := u.ids.Peek(id)
	return ok && now.Sub(at) < unknownTTL
}

// add remembers id as unknown from now.
func (u *unknownIDs) add(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ids.Add(id, u.now())
}

// forget drops id, once it is registered.
func (u *unknownIDs) forget(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ids.Remove(id)
}

// dropStale drops the entries older than unknownTTL: they are in the order
// they were found, the oldest at the back.
func (u *unknownIDs) dropStale(now time.Time) {
	u.ids.DropOldestWhile(func(_ string, at time.Time) bool { return now.Sub(at) >= unknownTTL })
}
