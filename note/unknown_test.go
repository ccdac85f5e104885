package note

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestUnknownIDsAreForgottenAfterTheirTTL(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Unix(1e9, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	u := newUnknownIDs(clock)
	require.False(t, u.has("x"))
	u.add("x")
	require.True(t, u.has("x"))
	mu.Lock()
	now = now.Add(unknownTTL - time.Millisecond)
	mu.Unlock()
	require.True(t, u.has("x"))
	mu.Lock()
	now = now.Add(time.Millisecond)
	mu.Unlock()
	require.False(t, u.has("x"), "stale after unknownTTL")

	u.add("y")
	u.forget("y")
	require.False(t, u.has("y"), "registered")

	// Bounded, under concurrent use (run with -race).
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range maxUnknownIDs {
				id := strconv.Itoa(g) + "-" + strconv.Itoa(i)
				u.add(id)
				u.has(id)
			}
		})
	}
	wg.Wait()
	u.mu.Lock()
	defer u.mu.Unlock()
	require.LessOrEqual(t, u.ids.Len(), maxUnknownIDs)
}
