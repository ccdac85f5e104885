package apptest

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// SignupBurst signs up users prefix0..prefix(n-1) to an activity at once,
// spread over the instances (256 requests in flight at most), and counts
// the answers by status (-1 for a transport error). A 409 must be
// activity_full.
func SignupBurst(t testing.TB, insts []*Instance, activityID, prefix string, n int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for i := range n {
		inst := insts[i%len(insts)]
		tok := inst.Token(t, fmt.Sprintf("%s%d", prefix, i), false)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := Do(http.MethodPost, inst.URL+"/v1/activities/"+activityID+"/registrations", tok, "{}")
			status := -1
			if err == nil {
				status = r.Status
				if (r.Status == http.StatusConflict && r.ErrorCode() != "activity_full") || r.Status >= 500 {
					t.Errorf("signup answered %d %s", r.Status, r.Body)
				}
			}
			mu.Lock()
			counts[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return counts
}
