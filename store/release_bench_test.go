package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// stormActivities creates n activities of seats seats with a waiting
// list, each filled with seats+waiting signups, and returns them with the
// first release registrations of each (holding a seat, unconfirmed).
func stormActivities(tb testing.TB, s *store.Store, n, seats, waiting, release int) ([]string, [][]string) {
	tb.Helper()
	ctx := context.Background()
	acts := make([]string, n)
	regs := make([][]string, n)
	for i := range acts {
		a, err := s.CreateActivity(ctx, newID("a"), registration.NewActivity{Title: fmt.Sprint("storm ", i), Capacity: seats, HoldSeconds: 900, Waitlist: true})
		require.NoError(tb, err)
		acts[i] = a.ID
		var cmds []registration.Command
		for j := range seats + waiting {
			c := signupOf(fmt.Sprintf("s%d-%d", i, j))
			cmds = append(cmds, c)
			if j < release {
				regs[i] = append(regs[i], c.RegistrationID)
			}
		}
		applied, err := s.Apply(ctx, []registration.CommandBatch{{ActivityID: a.ID, Commands: cmds}}, time.Now())
		require.NoError(tb, err)
		require.NoError(tb, applied[0].Err)
	}
	return acts, regs
}

// BenchmarkApplyReleases applies the releases of a storm (20 activities
// of 100 seats, 80 waiting, 60 of each released, so 1,200 released and
// 1,200 promoted): one change transaction for all the activities
// (together=true, as group commit takes them when the due work submits
// them at once) or one transaction per activity, one after the other. It
// reports the ms the storm took; the setup (3,600 signups) is not timed.
func BenchmarkApplyReleases(b *testing.B) {
	for _, together := range []bool{false, true} {
		b.Run(fmt.Sprint("together=", together), func(b *testing.B) {
			url := testenv.NewDatabase(b)
			s := store.New(testenv.Pool(b, url, 4))
			var total time.Duration
			for range b.N {
				b.StopTimer()
				acts, regs := stormActivities(b, s, 20, 100, 80, 60)
				batches := make([]registration.CommandBatch, len(acts))
				for i, a := range acts {
					batches[i] = registration.CommandBatch{ActivityID: a, Commands: []registration.Command{registration.ReleaseCommand{
						Origin: registration.Origin{Actor: registration.ActorSystem}, Reason: registration.CancelUnconfirmed, RegistrationIDs: regs[i]}}}
				}
				b.StartTimer()
				start := time.Now()
				txs := [][]registration.CommandBatch{batches}
				if !together {
					txs = nil
					for _, bt := range batches {
						txs = append(txs, []registration.CommandBatch{bt})
					}
				}
				for _, tx := range txs {
					applied, err := s.Apply(context.Background(), tx, time.Now())
					require.NoError(b, err)
					for _, a := range applied {
						require.NoError(b, a.Err)
					}
				}
				total += time.Since(start)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms")
		})
	}
}
