package loadtest

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// check compares the service with its acknowledgements after the load.
func (st *soakState) check(ctx context.Context, res *SoakResult) {
	st.mu.Lock()
	res.Requests = st.requests.Load()
	for k, v := range st.status {
		res.ByStatus[k] = v
	}
	res.Errors5xxInside, res.Errors5xxOutside, res.TransportErrors = st.in5xx, st.out5xx, st.transErr
	res.Outages = append([]soakWindow(nil), st.outages...)
	res.Ops = st.ops
	res.TransportErrorsByOp, res.UnavailableByOp, res.SampleErrors = st.errByOp, st.unavByOp, st.samples
	views, waters := st.views, st.waters
	st.mu.Unlock()
	res.StreamEvents = st.events.Load()
	for _, id := range st.activities {
		a, err1 := st.c.WithToken(st.admin).GetActivity(ctx, id) // the authority's numbers
		s, err2 := st.c.Seats(ctx, id)
		if err1 != nil || err2 != nil {
			res.DisplayMismatches = append(res.DisplayMismatches, fmt.Sprintf("%s: %v %v", id, err1, err2))
			continue
		}
		if a.Taken > st.capacity {
			res.Overfull = append(res.Overfull, fmt.Sprintf("%s: %d of %d", id, a.Taken, st.capacity))
		}
		if s.Taken != a.Taken {
			res.DisplayMismatches = append(res.DisplayMismatches, fmt.Sprintf("%s: display %d (%s), authority %d", id, s.Taken, s.Source, a.Taken))
		}
	}
	for _, n := range st.notes {
		stats, err := st.c.NoteStats(ctx, n)
		if err != nil {
			res.ViewMismatches = append(res.ViewMismatches, n+": "+err.Error())
			continue
		}
		if stats.Views != views[n] || stats.Waters != waters[n] {
			res.ViewMismatches = append(res.ViewMismatches, fmt.Sprintf("%s: stored %d/%d, acknowledged %d/%d", n, stats.Views, stats.Waters, views[n], waters[n]))
		}
	}
	res.Pass = len(res.Overfull) == 0 && len(res.DisplayMismatches) == 0 && len(res.ViewMismatches) == 0 &&
		res.Errors5xxOutside == 0 && flat(res.Goroutines, 1.5, 50) && flat(res.RSSMiB, 1.5, 64)
}

// flat reports whether the last sample is within factor (or slack) of the
// median of the samples after the first quarter (the warm-up).
func flat(samples []float64, factor, slack float64) bool {
	if len(samples) < 4 {
		return true
	}
	warm := append([]float64(nil), samples[len(samples)/4:]...)
	sort.Float64s(warm)
	med := warm[len(warm)/2]
	last := samples[len(samples)-1]
	return last <= med*factor || last <= med+slack
}

// sampleProcess reads go_goroutines and process_resident_memory_bytes from
// /metrics.
func sampleProcess(ctx context.Context, c *API) (goroutines, rss float64) {
	text, err := c.Text(ctx, "/metrics")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "go_goroutines":
			goroutines = v
		case "process_resident_memory_bytes":
			rss = v
		}
	}
	return goroutines, rss
}

func waitReady(ctx context.Context, c *API, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, err := c.Ready(ctx); err == nil {
			return
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
