package history

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRecorderIsSafeAcrossClientsAndRoundTrips(t *testing.T) {
	r := New()
	r.Set("seat_cache_ttl", "5s")
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := range 100 {
				logical := r.NewLogical()
				p := r.Invoke(Op{Logical: logical, Client: c, Instance: "n0#1", Kind: Signup, Input: Input{Key: "a", User: i % 5}})
				if i%10 == 0 {
					p.End(Unknown, Output{Error: "EOF"})
					continue
				}
				p.End(Answered, Output{Status: 201, Registration: "r"})
			}
		})
	}
	f := r.BeginFault("redis_kill", "redis")
	f.End()
	in := r.Invoke(Op{Kind: ReadSeats})
	wg.Wait()

	h := r.History()
	require.Len(t, h.Ops, 801)
	for i, op := range h.Ops {
		require.Equal(t, i, op.ID)
		if op.Result != "" && op.Return > 0 {
			require.GreaterOrEqual(t, op.Return, op.Call, "monotonic clock")
		}
	}
	last := h.Ops[in.id]
	require.Equal(t, Unknown, last.Result, "an attempt still in flight has no answer")
	require.NotZero(t, h.Ops[in.id].Logical, "an attempt of its own gets a logical id")
	require.Len(t, h.Faults, 1)
	require.GreaterOrEqual(t, h.Faults[0].End, h.Faults[0].Start)

	path := filepath.Join(t.TempDir(), "h.json")
	require.NoError(t, h.WriteFile(path))
	back, err := ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, h, back)
}
