package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/histcheck"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// TestDoorsStayExactThroughACrashAndAFlush scans 2,000 tickets at 8 devices
// over two capacityd processes, with a tenth of the scans repeated at
// another device and some exits, while Redis is flushed and one process
// is SIGKILLed. A device whose instance died retries the same scan (the
// same Idempotency-Key) at the other. Afterwards the list's history holds
// every answered entry and exit, no registration entered twice on the
// "once" list, and the counts equal the history.
//
// It is the package's heaviest test: it runs alone, before the parallel
// ones, so that their timing-sensitive checks do not share the machine
// with it.
func TestDoorsStayExactThroughACrashAndAFlush(t *testing.T) {
	const tickets, devices = 2000, 8
	db := testenv.NewDatabase(t)
	rs := testenv.PrivateRedis(t)
	procs := []*apptest.Process{apptest.StartProcess(t, db, rs.URL()), apptest.StartProcess(t, db, rs.URL())}
	admin := procs[0].Token(t, "organiser", true)
	do := func(p int, method, path string, body any, headers ...string) (apptest.Response, error) {
		return apptest.Do(method, procs[p].URL+path, admin, body, headers...)
	}
	r, err := do(0, http.MethodPost, "/v1/activities", map[string]any{"title": "congress", "capacity": tickets})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var act struct{ ID string }
	r.JSON(t, &act)
	r, err = do(0, http.MethodPost, "/v1/checkin-lists", map[string]any{"name": "Main door", "activity_ids": []string{act.ID}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var list struct{ ID string }
	r.JSON(t, &list)

	tks := make([]string, tickets)
	regOf := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	for w := range 16 {
		wg.Go(func() {
			for i := range work {
				tok := procs[0].Token(t, fmt.Sprintf("doctor-%d", i), false)
				sr, err := apptest.Do(http.MethodPost, procs[w%2].URL+"/v1/activities/"+act.ID+"/registrations", tok, map[string]any{})
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, sr.Status, "%s", sr.Body)
				var reg struct{ ID string }
				sr.JSON(t, &reg)
				tr, err := apptest.Do(http.MethodGet, procs[w%2].URL+"/v1/registrations/"+reg.ID+"/ticket", tok, nil)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, tr.Status, "%s", tr.Body)
				var tk struct{ Ticket string }
				tr.JSON(t, &tk)
				mu.Lock()
				tks[i], regOf[reg.ID] = tk.Ticket, i
				mu.Unlock()
			}
		})
	}
	for i := range tickets {
		work <- i
	}
	close(work)
	wg.Wait()

	// Each device scans its share; a tenth of the tickets are scanned again
	// at the next device, and every twentieth is scanned out again.
	type scan struct {
		ticket, typ, key string
	}
	queues := make([][]scan, devices)
	for i, tk := range tks {
		d := i % devices
		queues[d] = append(queues[d], scan{tk, "entry", fmt.Sprintf("s-%d-entry", i)})
		if i%10 == 0 {
			queues[(d+1)%devices] = append(queues[(d+1)%devices], scan{tk, "entry", fmt.Sprintf("s-%d-again", i)})
		}
		if i%20 == 0 {
			queues[d] = append(queues[d], scan{tk, "exit", fmt.Sprintf("s-%d-exit", i)})
		}
	}
	var dead atomic.Bool
	var okSeqs sync.Map // seq → scan key
	var refused, sent atomic.Int64
	for d := range devices {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(d), 7))
			for _, s := range queues[d] {
				if n := sent.Add(1); n == int64(len(tks)/2) {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					require.NoError(t, testenv.RedisClient(t, rs.URL()).FlushAll(ctx).Err())
					cancel()
					procs[0].Signal(t, syscall.SIGKILL)
					dead.Store(true)
				}
				p := rng.IntN(2)
				for attempt := 0; ; attempt++ {
					if dead.Load() {
						p = 1
					}
					res, err := do(p, http.MethodPost, "/v1/checkin-lists/"+list.ID+"/redeem",
						map[string]any{"ticket": s.ticket, "type": s.typ, "device": fmt.Sprintf("device-%d", d)}, "Idempotency-Key", s.key)
					if err != nil || res.Status >= 500 {
						// The device tries again at once, at the live instance
						// once the other is gone.
						require.Less(t, attempt, 200, "scan %s never answered: %v", s.key, err)
						continue
					}
					switch res.Status {
					case http.StatusOK:
						var a scanAnswer
						res.JSON(t, &a)
						okSeqs.Store(a.Checkin.Seq, s.key)
					case http.StatusConflict:
						code := res.ErrorCode()
						require.True(t, code == "already_checked_in" || code == "not_inside", "%s: %s", s.key, res.Body)
						refused.Add(1)
					default:
						t.Fatalf("scan %s: %d %s", s.key, res.Status, res.Body)
					}
					break
				}
			}
		})
	}
	wg.Wait()
	require.True(t, dead.Load())

	// The history, in commit order.
	type item struct {
		Seq            int64  `json:"seq"`
		RegistrationID string `json:"registration_id"`
		Type           string `json:"type"`
		Forced         bool   `json:"forced"`
	}
	var history []item
	for after := int64(0); ; {
		hr, err := do(1, http.MethodGet, fmt.Sprintf("/v1/checkin-lists/%s/checkins?after=%d&limit=500", list.ID, after), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, hr.Status, "%s", hr.Body)
		var page struct {
			Items     []item `json:"items"`
			NextAfter int64  `json:"next_after"`
		}
		hr.JSON(t, &page)
		if len(page.Items) == 0 {
			break
		}
		history = append(history, page.Items...)
		after = page.NextAfter
	}
	bySeq := map[int64]item{}
	entries, exits := map[string]int{}, map[string]int{}
	for i, it := range history {
		require.Equal(t, int64(i+1), it.Seq, "the history's seqs have no gap")
		require.False(t, it.Forced)
		bySeq[it.Seq] = it
		if it.Type == "entry" {
			entries[it.RegistrationID]++
		} else {
			exits[it.RegistrationID]++
		}
	}
	answeredOK := 0
	okSeqs.Range(func(k, v any) bool {
		answeredOK++
		it, ok := bySeq[k.(int64)]
		require.True(t, ok, "answered check-in %d (%s) is in the history", k, v)
		wantType := "entry"
		if strings.HasSuffix(v.(string), "-exit") {
			wantType = "exit"
		}
		require.Equal(t, wantType, it.Type)
		require.Equal(t, regOf[it.RegistrationID], atoiSuffix(t, v.(string)), "the check-in is the scanned ticket's")
		return true
	})
	assert.Equal(t, len(history), answeredOK, "every recorded check-in was answered 200 (retries answered their first)")
	inside := 0
	for reg, n := range entries {
		require.Equal(t, 1, n, "registration %s entered once on a once list", reg)
		require.LessOrEqual(t, exits[reg], 1)
		inside += n - exits[reg]
	}
	assert.Len(t, entries, tickets, "every ticket entered")
	l := readList(t, procs[1].URL, admin, list.ID)
	assert.Equal(t, tickets, l.CheckedIn)
	assert.Equal(t, inside, l.Inside, "inside = entries - exits")
	t.Logf("%d recorded, %d refused as duplicates or not inside", len(history), refused.Load())

	// The same promises through the history checker, with the activity's
	// event log for the registrations' validity at each entry.
	regIDs := make([]string, tickets)
	for id, i := range regOf {
		regIDs[i] = id
	}
	dl := histcheck.DoorList{ID: list.ID, Entry: "once", CheckedIn: l.CheckedIn, Inside: l.Inside, Conflicts: l.Conflicts,
		AnswersComplete: true, Events: [][]histcheck.DoorEvent{doorEvents(t, procs[1].URL, admin, act.ID)}}
	for _, it := range history {
		dl.History = append(dl.History, histcheck.DoorCheckIn{Seq: it.Seq, RegistrationID: it.RegistrationID, Type: it.Type, Seats: 1,
			Forced: it.Forced})
	}
	okSeqs.Range(func(k, v any) bool {
		key := v.(string)
		typ := "entry"
		if strings.HasSuffix(key, "-exit") {
			typ = "exit"
		}
		dl.Answers = append(dl.Answers, histcheck.DoorCheckIn{Seq: k.(int64), RegistrationID: regIDs[atoiSuffix(t, key)], Type: typ, Seats: 1})
		return true
	})
	verdict := histcheck.CheckDoor(dl)
	require.True(t, verdict.OK(), "%v", verdict.Violations)
}

// doorEvents reads an activity's whole event log for the door check.
func doorEvents(t *testing.T, base, token, activityID string) []histcheck.DoorEvent {
	t.Helper()
	var out []histcheck.DoorEvent
	for after := int64(0); ; {
		r, err := apptest.Do(http.MethodGet, fmt.Sprintf("%s/v1/activities/%s/events?after=%d&limit=500", base, activityID, after), token, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var page struct {
			Items []struct {
				Seq            int64  `json:"seq"`
				RegistrationID string `json:"registration_id"`
				Type           string `json:"type"`
				To             string `json:"to"`
				ListID         string `json:"list_id"`
				Forced         bool   `json:"forced"`
			} `json:"items"`
			NextAfter int64 `json:"next_after"`
		}
		r.JSON(t, &page)
		if len(page.Items) == 0 {
			return out
		}
		for _, e := range page.Items {
			out = append(out, histcheck.DoorEvent{Seq: e.Seq, RegistrationID: e.RegistrationID, Type: e.Type, To: e.To, ListID: e.ListID,
				Forced: e.Forced})
		}
		after = page.NextAfter
	}
}

func atoiSuffix(t *testing.T, key string) int {
	t.Helper()
	var n int
	_, err := fmt.Sscanf(strings.TrimPrefix(key, "s-"), "%d", &n)
	require.NoError(t, err)
	return n
}

func readList(t *testing.T, base, token, id string) listAnswer {
	t.Helper()
	r, err := apptest.Do(http.MethodGet, base+"/v1/checkin-lists/"+id, token, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var l listAnswer
	r.JSON(t, &l)
	return l
}
