package note_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/note"
	"github.com/physiciansnet/capacityd/store"
)

// Increments are combined per note, one note to an upsert: an increment
// shares its upsert only with increments of the same note, and a note id
// PostgreSQL could refuse never joins one. Poisoned increments sent among
// a crowd's each get their own 400, and every other increment is counted
// exactly once.
func TestPoisonedNoteIncrementsFailAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, "", store.ConnPoolConfig{MaxConns: 4}, note.Config{})
	ctx := context.Background()
	poisoned := []string{"\xff", "bad\x00id", "with space", strings.Repeat("n", note.MaxIDLen+1), "ünïcode"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	counted := 0
	for i := range 400 {
		wg.Go(func() {
			if i%10 == 0 {
				_, err := b.svc.Increment(ctx, poisoned[i/10%len(poisoned)], []note.Kind{note.View, note.Water}[i%2])
				require.True(t, capacityd.IsCode(err, capacityd.EInvalid), "a poisoned note id gets its own 400: %v", err)
				return
			}
			_, err := b.svc.Increment(ctx, "crowded", []note.Kind{note.View, note.Water}[i%2])
			require.NoError(t, err)
			mu.Lock()
			counted++
			mu.Unlock()
		})
	}
	wg.Wait()
	st, err := b.svc.Get(ctx, "crowded")
	require.NoError(t, err)
	require.Equal(t, int64(counted), st.Views+st.Waters)
	require.Equal(t, 360, counted)
}
