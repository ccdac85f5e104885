package loadtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// loopbackClients is how many clients the loopback baseline runs: a
// webhook's most concurrent deliveries by default.
const loopbackClients = 16

// loopbackBody stands for a delivery's payload: an event with its
// registration, as JSON, about as long as a real one.
var loopbackBody = bytes.Repeat([]byte("x"), 560)

// MeasureLoopbackPost runs the bare HTTP exchange a webhook delivery
// makes, for d: net/http clients in this process POST an event-sized
// body with the three signature headers to the webhook scenario's
// receiver, also in this process, over loopback with keep-alive. It
// records, in r.Baselines, the process's processor time per exchange in
// microseconds, both ends included: what any delivery costs this
// machine at least, before the claim of its batch and the record of its
// attempt. Nothing else may run in this process meanwhile.
func MeasureLoopbackPost(ctx context.Context, d time.Duration, r *Report, log io.Writer) error {
	rc, err := startHookReceiver()
	if err != nil {
		return err
	}
	defer rc.close()
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: loopbackClients, MaxConnsPerHost: loopbackClients}}
	defer c.CloseIdleConnections()
	out := Drive(ctx, Load{Name: BaselineLoopbackPostCPU, Clients: loopbackClients, Duration: d, MaxOps: int64(d.Seconds()*maxBaselineRate) + 1000}, log,
		func(ctx context.Context, _ int, i int64) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, rc.url, bytes.NewReader(loopbackBody))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("webhook-id", fmt.Sprintf("evt_%d", i))
			req.Header.Set("webhook-timestamp", "1764460800")
			req.Header.Set("webhook-signature", "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=")
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != http.StatusNoContent {
				return fmt.Errorf("loadtest: loopback receiver answered %d", resp.StatusCode)
			}
			return nil
		})
	if out.CPU == nil || out.Ops == 0 {
		return nil // not measurable here (no /proc)
	}
	r.Baselines[BaselineLoopbackPostCPU] = Num(round(out.CPU.Seconds[CPULoadTest]*1e6/float64(out.Ops), 1))
	return nil
}
