package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/histcheck"
)

// doorShare is the share (in 100) of the workers' operations that are
// scans at a door: one check-in list per activity (entry "once", room for
// doorRoom seats), made at its first scan; a scan names a registration
// the clients know of the activity, is an exit one time in five and a
// forced (offline) upload one time in ten, and is retried under its own
// Idempotency-Key at random nodes until answered.
const (
	doorShare = 6
	doorRoom  = 3
)

// doors are the workload's check-in lists and the check-ins the clients
// were answered 200 for.
type doors struct {
	mu    sync.Mutex
	lists map[string]*doorList // by activity
	scans int
}

// doorList is one activity's list, as its clients know it.
type doorList struct {
	id       string
	activity string
	answers  []histcheck.DoorCheckIn
}

// scanAtDoor scans a registration the clients know of a: see doorShare.
func (w *workload) scanAtDoor(rng *rand.Rand, worker int, a *activity) {
	reg := a.reg(rng.IntN(users))
	if reg.id == "" {
		return
	}
	in := client.RedeemRequest{RegistrationID: reg.id, Device: fmt.Sprintf("device-%d", worker%4)}
	if rng.IntN(5) == 0 {
		in.Type = client.ScanExit
	}
	if rng.IntN(10) == 0 {
		at := time.Now().Add(-time.Minute).UTC()
		in.Force, in.At = true, &at
	}
	w.scan(rng, a, in)
}

// scan sends the scan in at a's door, retried under its own
// Idempotency-Key at random nodes until answered, and keeps the check-in
// it was answered 200 with.
func (w *workload) scan(rng *rand.Rand, a *activity, in client.RedeemRequest) {
	l := w.doorOf(a)
	if l == nil {
		return
	}
	w.doors.mu.Lock()
	w.doors.scans++
	key := fmt.Sprintf("scan-%s-%d", w.run, w.doors.scans)
	w.doors.mu.Unlock()
	for n := 1; n <= maxAttempts && w.ctx.Err() == nil; n++ {
		node := w.nodes[rng.IntN(len(w.nodes))]
		res, err := client.New(node.URL, w.admin, w.hc).Redeem(w.ctx, l.id, in, key)
		if err == nil && res.Checkin != nil {
			c := res.Checkin
			ci := histcheck.DoorCheckIn{Seq: c.Seq, RegistrationID: c.RegistrationID, Type: c.Type, Seats: c.Seats, Forced: c.Forced}
			if c.Conflict != nil {
				ci.Conflict = *c.Conflict
			}
			w.doors.mu.Lock()
			l.answers = append(l.answers, ci)
			w.doors.mu.Unlock()
			return
		}
		if ce, ok := err.(*client.Error); ok && ce.Status < 500 {
			return // a refusal: nothing was written
		}
		if !sleep(w.ctx, time.Duration(n)*200*time.Millisecond) {
			return
		}
	}
}

// doorOf returns a's list, making it at the first scan (nil while it
// could not be made).
func (w *workload) doorOf(a *activity) *doorList {
	w.doors.mu.Lock()
	l, ok := w.doors.lists[a.id]
	w.doors.mu.Unlock()
	if ok {
		return l
	}
	room := doorRoom
	for n := 1; n <= maxAttempts && w.ctx.Err() == nil; n++ {
		node := w.nodes[n%len(w.nodes)]
		l, err := client.New(node.URL, w.admin, w.hc).CreateCheckinList(w.ctx, client.NewCheckinList{Name: "chaos door",
			ActivityIDs: []string{a.id}, Entry: client.EntryOnce, MaxInside: &room})
		if err == nil {
			w.doors.mu.Lock()
			defer w.doors.mu.Unlock()
			if w.doors.lists == nil {
				w.doors.lists = map[string]*doorList{}
			}
			if known, ok := w.doors.lists[a.id]; ok {
				return known // another worker's list: this one is never scanned
			}
			dl := &doorList{id: l.ID, activity: a.id}
			w.doors.lists[a.id] = dl
			return dl
		}
		// A list made by an attempt without an answer is never scanned:
		// only the lists known here are checked.
	}
	return nil
}

// checkDoors runs the door check on every list, with its history, its
// counts and its activity's event log read from the healed cluster. A
// scan without an answer may have been recorded: the answers are not
// taken as complete.
func (w *workload) checkDoors(t testing.TB) histcheck.DoorVerdict {
	var out histcheck.DoorVerdict
	w.doors.mu.Lock()
	defer w.doors.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client.New(w.nodes[0].URL, w.admin, &http.Client{Timeout: 30 * time.Second})
	for _, l := range w.doors.lists {
		dl, err := readDoor(ctx, c, l)
		if err != nil {
			out.Violations = append(out.Violations, fmt.Sprintf("list %s: %v", l.id, err))
			continue
		}
		v := histcheck.CheckDoor(dl)
		out.CheckIns += v.CheckIns
		out.Answers += v.Answers
		for _, s := range v.Violations {
			out.Violations = append(out.Violations, l.id+": "+s)
		}
	}
	return out
}

// readDoor reads a list's counts, history and activity's event log.
func readDoor(ctx context.Context, c *client.Client, l *doorList) (histcheck.DoorList, error) {
	list, err := c.GetCheckinList(ctx, l.id)
	if err != nil {
		return histcheck.DoorList{}, err
	}
	dl := histcheck.DoorList{ID: l.id, Entry: list.Entry, MaxInside: list.MaxInside, CheckedIn: list.CheckedIn, Inside: list.Inside,
		Conflicts: list.Conflicts, Answers: l.answers}
	for after := int64(0); ; {
		feed, err := c.Checkins(ctx, l.id, after, 500)
		if err != nil {
			return dl, err
		}
		if len(feed.Items) == 0 {
			break
		}
		for _, ci := range feed.Items {
			d := histcheck.DoorCheckIn{Seq: ci.Seq, RegistrationID: ci.RegistrationID, Type: ci.Type, Seats: ci.Seats, Forced: ci.Forced}
			if ci.Conflict != nil {
				d.Conflict = *ci.Conflict
			}
			dl.History = append(dl.History, d)
		}
		after = feed.NextAfter
	}
	var log []histcheck.DoorEvent
	for after := int64(0); ; {
		feed, err := c.ActivityEvents(ctx, l.activity, client.EventFeedOptions{After: after, Limit: 500})
		if err != nil {
			return dl, err
		}
		if len(feed.Items) == 0 {
			break
		}
		for _, e := range feed.Items {
			log = append(log, histcheck.DoorEvent{Seq: e.Seq, RegistrationID: e.RegistrationID, Type: e.Type, To: string(e.To),
				ListID: e.ListID, Forced: e.Forced})
		}
		after = feed.NextAfter
	}
	dl.Events = [][]histcheck.DoorEvent{log}
	return dl, nil
}
