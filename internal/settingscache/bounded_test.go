package settingscache

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBoundedStaysBoundedAndExpires(t *testing.T) {
	t.Parallel()
	b := newBounded[int](100)
	now := time.Unix(1000, 0)
	for i := range 1000 {
		b.put(strconv.Itoa(i), i, now.Add(time.Second), now)
		require.LessOrEqual(t, b.len(), 100)
	}
	v, ok := b.get("999", now)
	require.True(t, ok, "the entry just put is kept")
	require.Equal(t, 999, v)
	_, ok = b.get("999", now.Add(time.Second))
	require.False(t, ok, "expired at its until")

	// A full map of expired entries drops them all before it drops live
	// ones.
	later := now.Add(time.Hour)
	b.put("live", 1, later.Add(time.Second), later)
	require.Equal(t, 1, b.len())
	b.remove("live")
	_, ok = b.get("live", later)
	require.False(t, ok)
}
