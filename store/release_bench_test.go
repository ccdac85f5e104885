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

func BenchmarkApplyReleases(b *testing.B) {
	for _, together := range []bool{false, true} {
		b.Run(fmt.Sprint("together=", together), func(b *testing.B) {
			url := testenv.NewDatabase(b)
			s := store.New(testenv.Pool(b, url, 4))
			var total time.Duration
			for range b.N {
				b.StopTimer()
				acts, regs := stormActivities(b, s, 20, 100, 80, 60)
				b.StartTimer()
				var batches []registration.CommandBatch
				for i, a := range acts {
					batches = append(batches, registration.CommandBatch{ActivityID: a, Commands: []registration.Command{
						registration.ReleaseCommand{Origin: registration.Origin{Actor: "system"}, Reason: registration.CancelUnconfirmed, RegistrationIDs: regs[i]}}})
				}
				start := time.Now()
				if together {
					_, err := s.Apply(context.Background(), batches, time.Now())
					require.NoError(b, err)
				} else {
					for _, bt := range batches {
						_, err := s.Apply(context.Background(), []registration.CommandBatch{bt}, time.Now())
						require.NoError(b, err)
					}
				}
				total += time.Since(start)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms")
		})
	}
}
