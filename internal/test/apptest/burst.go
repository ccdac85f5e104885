package apptest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// SignupBurst signs up users prefix0..prefix(n-1) to an activity at once,
// spread over the instances (256 requests in flight at most), and counts
// the answers by status (201 admitted, 202 waitlisted, a refusal's status,
// -1 for a request that got no answer). A 409 must be activity_full. A
// 503 (the admission lock not had in time on a loaded machine: nothing
// was written) is sent again after its Retry-After, as a client would, up
// to three times; the test fails on any other 5xx.
func SignupBurst(t testing.TB, insts []*Instance, activityID, prefix string, n int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for i := range n {
		api := insts[i%len(insts)].API(t, fmt.Sprintf("%s%d", prefix, i), false)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res, err := api.Signup(context.Background(), activityID, client.SignupOptions{})
			for try := 0; try < 3; try++ {
				var e *client.Error
				if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable {
					break
				}
				time.Sleep(max(e.RetryAfter, time.Second))
				res, err = api.Signup(context.Background(), activityID, client.SignupOptions{})
			}
			status := SignupStatus(res, err)
			var e *client.Error
			if errors.As(err, &e) && ((e.Status == http.StatusConflict && e.Code != client.CodeActivityFull) || e.Status >= 500) {
				t.Errorf("signup answered %v", e)
			}
			mu.Lock()
			counts[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return counts
}
