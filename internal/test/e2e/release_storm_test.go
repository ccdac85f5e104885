package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// BenchmarkReleaseStorm releases, at one moment, the unconfirmed seats of
// 20 activities of 100 seats, each with 60 registrations unconfirmed and 80
// waiting, over two instances. It reports, as means over the runs, the
// time from the moment until the last activity's line is promoted (all 60
// freed seats refilled, in line order, at the authority), the part of it
// from the first release transaction's start (the rest is the due-work
// tick's wait, 0 to 1 s), the transactions that released seats (distinct
// transaction times of the release events) and all the change
// transactions of the storm. The setup (3,600 signups, 800 confirmations)
// is not timed.
func BenchmarkReleaseStorm(b *testing.B) {
	var untilRefilled, fromFirst, releaseTx, changeTx float64
	const activities, seats, unconfirmed, waiting = 20, 100, 60, 80
	for range b.N {
		b.StopTimer()
		a := apptest.Start(b, apptest.Options{})
		c := apptest.Start(b, apptest.Options{DatabaseURL: a.DatabaseURL})
		insts := []*apptest.Instance{a, c}
		admin := a.Token(b, "organiser", true)
		acts := make([]string, activities)
		for i := range acts {
			acts[i] = a.CreateWaitlisted(b, fmt.Sprintf("storm %d", i), seats)
		}
		work := make(chan [2]int)
		var wg sync.WaitGroup
		for w := range 32 {
			wg.Go(func() {
				inst := insts[w%2]
				for job := range work {
					user := fmt.Sprintf("u%d-%d", job[0], job[1])
					tok := inst.Token(b, user, false)
					res, err := apptest.Do(http.MethodPost, inst.URL+"/v1/activities/"+acts[job[0]]+"/registrations", tok, map[string]any{})
					require.NoError(b, err)
					if res.Status != http.StatusCreated && res.Status != http.StatusAccepted {
						b.Errorf("signup: %d %s", res.Status, res.Body)
					}
				}
			})
		}
		for i := range acts {
			for j := range seats + waiting {
				work <- [2]int{i, j}
			}
		}
		close(work)
		wg.Wait()
		// The seated who confirm: the first seats-unconfirmed of each.
		for _, id := range acts {
			r := a.MustDo(b, http.MethodGet, fmt.Sprintf("/v1/activities/%s/registrations?status=pending&limit=%d", id, seats-unconfirmed), admin, nil)
			require.Equal(b, http.StatusOK, r.Status, "%s", r.Body)
			var page struct{ Items []struct{ ID string } }
			r.JSON(b, &page)
			require.Len(b, page.Items, seats-unconfirmed)
			for _, reg := range page.Items {
				cr := a.MustDo(b, http.MethodPost, "/v1/registrations/"+reg.ID+"/confirm", admin, nil)
				require.Equal(b, http.StatusOK, cr.Status, "%s", cr.Body)
			}
		}
		moment := time.Now().Add(2 * time.Second).UTC()
		for _, id := range acts {
			patchActivity(b, a, admin, id, map[string]any{"confirm_by": moment.Format(time.RFC3339Nano)})
		}
		txBefore := transactions(a) + transactions(c)
		b.StartTimer()
		// Each activity is refilled once its line is down to the waiting
		// the released seats could not take (checked from before the
		// moment: nothing is released before it).
		tick := time.NewTicker(5 * time.Millisecond)
		for _, id := range acts {
			for ; ; <-tick.C {
				st, err := a.App.Store.SeatState(context.Background(), id)
				require.NoError(b, err)
				if st.Taken == seats && st.Waiting == waiting-unconfirmed {
					break
				}
			}
		}
		refilled := time.Now()
		tick.Stop()
		b.StopTimer()
		first, txs := releaseTransactions(b, a, acts)
		untilRefilled += float64(refilled.Sub(moment).Milliseconds())
		fromFirst += float64(refilled.Sub(first).Milliseconds())
		releaseTx += float64(txs)
		changeTx += transactions(a) + transactions(c) - txBefore
	}
	n := float64(b.N)
	b.ReportMetric(untilRefilled/n, "ms-until-refilled")
	b.ReportMetric(fromFirst/n, "ms-first-release-to-refilled")
	b.ReportMetric(releaseTx/n, "release-transactions")
	b.ReportMetric(changeTx/n, "transactions")
}

// releaseTransactions returns the start of the first transaction that
// released a seat of the activities and how many transactions did (their
// distinct transaction times, which every event of a transaction shares).
func releaseTransactions(b *testing.B, inst *apptest.Instance, acts []string) (time.Time, int) {
	b.Helper()
	var first time.Time
	var n int
	err := inst.App.Pool.QueryRow(context.Background(), `
		SELECT min(e.at), count(DISTINCT e.at) FROM registration_event e JOIN activity a ON a.id = e.activity_id
		WHERE a.public_id = ANY($1) AND e.type = 'registration.released'`, acts).Scan(&first, &n)
	require.NoError(b, err)
	return first, n
}

// transactions is an instance's change transactions so far.
func transactions(inst *apptest.Instance) float64 {
	mfs, err := inst.App.Registry.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "capacityd_admission_transactions_total" {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
