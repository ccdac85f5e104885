package lru

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCacheEvictsTheLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	c := New[string, int](3)
	require.False(t, c.Add("a", 1))
	require.False(t, c.Add("b", 2))
	require.False(t, c.Add("c", 3))
	_, _ = c.Get("a") // a is now the most recently used; b the least
	require.True(t, c.Add("d", 4))
	_, ok := c.Peek("b")
	require.False(t, ok, "b was the least recently used")
	for k, want := range map[string]int{"a": 1, "c": 3, "d": 4} {
		v, ok := c.Peek(k)
		require.True(t, ok, k)
		require.Equal(t, want, v)
	}
	require.Equal(t, 3, c.Len())

	// Peek does not refresh: c stays the oldest.
	k, _, ok := c.Oldest()
	require.True(t, ok)
	require.Equal(t, "c", k)
	// Updating an existing key neither evicts nor grows.
	require.False(t, c.Add("c", 30))
	require.Equal(t, 3, c.Len())
	k, _, _ = c.Oldest()
	require.Equal(t, "a", k)

	c.Remove("a")
	c.Remove("nothing")
	require.Equal(t, 2, c.Len())
}

func TestCacheStaysWithinItsCapacity(t *testing.T) {
	t.Parallel()
	c := New[int, int](100)
	for i := range 10_000 {
		c.Add(i, i)
		require.LessOrEqual(t, c.Len(), 100)
	}
	// The last hundred remain.
	for i := 9_900; i < 10_000; i++ {
		v, ok := c.Get(i)
		require.True(t, ok, strconv.Itoa(i))
		require.Equal(t, i, v)
	}
	require.Equal(t, 1, New[int, int](0).Cap(), "a capacity below 1 is 1")
}

func TestDropOldestWhileStopsAtTheFirstKept(t *testing.T) {
	t.Parallel()
	c := New[int, int](10)
	for i := range 10 {
		c.Add(i, i) // values in use order, as time stamps would be
	}
	require.Equal(t, 4, c.DropOldestWhile(func(_, v int) bool { return v < 4 }))
	require.Equal(t, 6, c.Len())
	k, _, _ := c.Oldest()
	require.Equal(t, 4, k)
	require.Equal(t, 6, c.DropOldestWhile(func(int, int) bool { return true }))
	require.Equal(t, 0, c.Len())
	_, _, ok := c.Oldest()
	require.False(t, ok)
	c.RemoveOldest() // empty: nothing happens
}
