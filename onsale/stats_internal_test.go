package onsale

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// lineAuthority answers QueueLine and counts the reads; any other method
// of the Authority is not expected.
type lineAuthority struct {
	Authority
	line  Line
	found bool
	reads int
}

func (a *lineAuthority) QueueLine(context.Context, string) (Line, bool, error) {
	a.reads++
	return a.line, a.found, nil
}

// TestLineStatsComeFromMemoryWhileTheLineIsAdvancedHere: a line this
// instance advances is answered from memory without a read; a line it
// does not (or no longer does) is read from the authority, and the read
// does not change what the instance remembers.
func TestLineStatsComeFromMemoryWhileTheLineIsAdvancedHere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	auth := &lineAuthority{line: Line{ActivityID: "a_1", Waiting: 7, TokensOut: 2}, found: true}
	q := New(auth, Options{})

	got, ok, err := q.LineStats(ctx, "a_1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(7), got.Waiting)
	require.Equal(t, 1, auth.reads)
	require.Empty(t, q.lines, "an admin's read is not remembered")

	q.mu.Lock()
	q.lines["a_1"] = Line{ActivityID: "a_1", Waiting: 3, AdmittedThrough: 12}
	q.hot["a_1"] = true
	q.mu.Unlock()
	got, ok, err = q.LineStats(ctx, "a_1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(3), got.Waiting)
	require.Equal(t, int64(12), got.AdmittedThrough)
	require.Equal(t, 1, auth.reads, "answered from memory")

	q.mu.Lock()
	delete(q.hot, "a_1")
	q.mu.Unlock()
	got, _, err = q.LineStats(ctx, "a_1")
	require.NoError(t, err)
	require.Equal(t, int64(7), got.Waiting, "a cooled line's memory may be old: read again")
	require.Equal(t, 2, auth.reads)

	auth.found = false
	_, ok, err = q.LineStats(ctx, "a_2")
	require.NoError(t, err)
	require.False(t, ok, "nobody joined yet")
}
