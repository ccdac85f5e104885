package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// devicesAtOneList has devices each scan their own ticket rounds times,
// one scan after the other, at a new list with entry "multiple", and
// returns the scans per transaction meanwhile. Every scan is recorded, in
// one gapless sequence.
func devicesAtOneList(t *testing.T, inst *apptest.Instance, devices, rounds int) float64 {
	t.Helper()
	act := inst.CreateActivity(t, "plenary", devices)
	d := newDoor(t, []*apptest.Instance{inst}, map[string]any{"name": "Main hall", "activity_ids": []string{act}, "entry": "multiple"})
	tickets := make([]string, devices)
	for i := range tickets {
		user := fmt.Sprintf("attendee-%d", i)
		tickets[i] = ticket(t, inst, inst.MustSignup(t, act, user).ID, user)
	}
	before := string(inst.MustDo(t, http.MethodGet, "/metrics", "", nil).Body)
	var wg sync.WaitGroup
	for i, tk := range tickets {
		wg.Go(func() {
			for range rounds {
				r := d.scan(t, 0, d.admin, map[string]any{"ticket": tk, "device": fmt.Sprintf("door-%d", i)})
				require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			}
		})
	}
	wg.Wait()
	after := string(inst.MustDo(t, http.MethodGet, "/metrics", "", nil).Body)
	delta := func(name string) float64 { return metricValue(t, after, name) - metricValue(t, before, name) }
	scans, txs := delta("capacityd_checkin_batch_size_sum"), delta("capacityd_checkin_batch_size_count")
	require.EqualValues(t, devices*rounds, scans)

	var page struct {
		Items []struct {
			Seq int64 `json:"seq"`
		} `json:"items"`
	}
	last := int64(devices * rounds)
	h := inst.MustDo(t, http.MethodGet, "/v1/checkin-lists/"+d.id+"/checkins?after="+strconv.FormatInt(last-1, 10), d.admin, nil)
	require.Equal(t, http.StatusOK, h.Status, "%s", h.Body)
	h.JSON(t, &page)
	require.Len(t, page.Items, 1, "the list's history ends at its last scan")
	require.Equal(t, last, page.Items[0].Seq)
	require.Equal(t, devices, d.read(t).CheckedIn)
	return scans / txs
}

// TestDevicesAtABusyListGatherIntoWholeBatches: with one transaction in
// flight per list, devices that wait for their answers split into two
// halves, the devices in a transaction missing the next. A gathering list
// waits for the devices it answered: its transactions grow past half the
// devices. (The deadline is longer than the default here, for devices
// slowed down by the race detector.)
func TestDevicesAtABusyListGatherIntoWholeBatches(t *testing.T) {
	t.Parallel()
	const devices, rounds = 24, 15
	plain := devicesAtOneList(t, apptest.Start(t, apptest.Options{}), devices, rounds)
	inst := apptest.Start(t, apptest.Options{App: app.Options{CheckinGather: time.Second}})
	gathered := devicesAtOneList(t, inst, devices, rounds)
	t.Logf("scans per transaction: %.1f gathering, %.1f not", gathered, plain)
	require.Greater(t, gathered, float64(devices)/2)
	require.Greater(t, gathered, plain)
	metrics := string(inst.MustDo(t, http.MethodGet, "/metrics", "", nil).Body)
	require.Positive(t, metricValue(t, metrics, `capacityd_checkin_gathers_total{ended="filled"}`), "gathers that filled are counted")
}
