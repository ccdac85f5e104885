package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/histcheck"
	"github.com/physiciansnet/capacityd/internal/test/history"
)

// Releases in the workload. One activity in releaseEvery (the turn of
// neither a series nor blocks) gets a release rule when it is created, in
// turn: a confirm_by, the release of its no-shows at its start
// (release_no_shows_after_minutes 0), or both, the start after
// confirm_by, and a waiting list, which the released seats promote; each
// moment releaseLead to twice that after its creation (the start one to
// three seconds after confirm_by when both), while its clients still work
// on it. The workers confirm its users'
// registrations (one operation in confirmShare on an activity with a
// confirm_by), and a racer per activity confirms them from raceLead
// before confirm_by until raceTail after it, and scans them at its door
// from raceLead before its start until raceTail after it, one action
// every racePace, so that late confirmations and late check-ins race the
// release (the due work runs every second on each instance). After the
// run, every activity's event log is read: its releases become operations
// of the service in the history (histcheck.AddReleases), and the release
// check judges them (histcheck.CheckReleases).
const (
	releaseEvery = 4
	releaseTurn  = 3
	releaseLead  = 2 * time.Second
	confirmShare = 10
	raceLead     = 400 * time.Millisecond
	raceTail     = 1500 * time.Millisecond
	racePace     = 60 * time.Millisecond
	// releaseWindow bounds a release transaction's commit after its
	// start: a change transaction's flush ends within clientTimeout, and
	// a margin.
	releaseWindow = clientTimeout + 10*time.Second
	// releaseSettle is how long after the last moment a run waits for its
	// releases before it settles: the due work's tick and a transaction.
	releaseSettle = 3 * time.Second
)

// releaseRule is the release rules an activity gets.
type releaseRule int

const (
	noRelease releaseRule = iota
	confirmRule
	noShowRule
	bothRules
)

// releaseRuleOf returns the rules of the n-th activity.
func releaseRuleOf(n int64) releaseRule {
	if n%releaseEvery != releaseTurn {
		return noRelease
	}
	return []releaseRule{confirmRule, noShowRule, bothRules}[(n/releaseEvery)%3]
}

// schedule sets the rule's moments on a new activity, from now (in
// microseconds, as the database keeps them).
func (r releaseRule) schedule(rng *rand.Rand, a *client.NewActivity) {
	if r == noRelease {
		return
	}
	at := func(after time.Duration) *time.Time {
		t := time.Now().Add(after + time.Duration(rng.Int64N(int64(releaseLead)))).UTC().Truncate(time.Microsecond)
		return &t
	}
	if r != noShowRule {
		a.ConfirmBy = at(releaseLead)
	}
	if r != confirmRule {
		lead := releaseLead
		if a.ConfirmBy != nil {
			lead = time.Until(*a.ConfirmBy) + time.Second
		}
		zero := 0
		a.StartsAt = at(lead)
		a.EndsAt, a.ReleaseNoShowsAfterMinutes = new(a.StartsAt.Add(time.Hour)), &zero
	}
}

// race runs a's racer: confirmations across its confirm_by, scans across
// its start.
func (w *workload) race(a *activity, seed uint64) {
	if a.confirmBy != nil {
		w.raceAt(*a.confirmBy, seed, func(rng *rand.Rand, worker int) { w.confirm(rng, worker, a, rng.IntN(users)) })
	}
	if a.noShowsAt != nil {
		w.raceAt(*a.noShowsAt, seed+1, func(rng *rand.Rand, worker int) {
			if reg := a.reg(rng.IntN(users)); reg.id != "" {
				w.scan(rng, a, client.RedeemRequest{RegistrationID: reg.id, Device: "door-race"})
			}
		})
	}
}

// raceAt runs act every racePace from raceLead before moment until
// raceTail after it, each in a goroutine of its own as a client of its
// own.
func (w *workload) raceAt(moment time.Time, seed uint64, act func(rng *rand.Rand, worker int)) {
	if !sleep(w.ctx, time.Until(moment.Add(-raceLead))) {
		return
	}
	tick := time.NewTicker(racePace)
	defer tick.Stop()
	for end := moment.Add(raceTail); time.Now().Before(end); {
		worker := int(w.racerClients.Add(1))
		w.racers.Go(func() { act(rand.New(rand.NewPCG(seed, uint64(worker))), worker) })
		select {
		case <-w.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// confirm confirms user u's known registration of a as its user, retried
// until answered (a confirmation is idempotent).
func (w *workload) confirm(rng *rand.Rand, worker int, a *activity, u int) {
	k := a.reg(u)
	if k.id == "" {
		return
	}
	in := history.Input{Key: a.id, User: u, Registration: k.id}
	w.retried(rng, worker, histcheck.Confirm, in, func(ctx context.Context, base string) (history.Output, error) {
		r, err := client.New(base, w.tokens[u], w.hc).Confirm(ctx, k.id)
		return registrationOutput(r), err
	})
}

// awaitReleases waits until every release moment is releaseSettle past,
// so that the run's reads come after its releases.
func (w *workload) awaitReleases() {
	w.mu.Lock()
	var last time.Time
	for _, a := range w.activities {
		for _, m := range []*time.Time{a.confirmBy, a.noShowsAt} {
			if m != nil && m.After(last) {
				last = *m
			}
		}
	}
	w.mu.Unlock()
	sleep(w.ctx, time.Until(last.Add(releaseSettle)))
}

// historyWithReleases returns the recorded history with the service's
// releases, read from every activity's event log, as operations of their
// own, and the release check of those logs.
func (w *workload) historyWithReleases(t testing.TB) (history.History, histcheck.ReleaseVerdict) {
	logs, err := w.readLogs(t)
	h := w.rec.History()
	histcheck.AddReleases(&h, logs, w.rec.At, releaseWindow)
	v := histcheck.CheckReleases(logs)
	if err != nil {
		v.Violations = append(v.Violations, err.Error())
	}
	return h, v
}

// readLogs reads every activity's event log, with the moments of its
// release rules, from the healed cluster.
func (w *workload) readLogs(t testing.TB) ([]histcheck.ActivityLog, error) {
	t.Helper()
	w.mu.Lock()
	acts := append([]*activity(nil), w.activities...)
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New(w.nodes[0].URL, w.admin, &http.Client{Timeout: 30 * time.Second})
	logs := make([]histcheck.ActivityLog, 0, len(acts))
	for _, a := range acts {
		l := histcheck.ActivityLog{ID: a.id, ConfirmBy: a.confirmBy, NoShowsAt: a.noShowsAt}
		for after := int64(0); ; {
			feed, err := c.ActivityEvents(ctx, a.id, client.EventFeedOptions{After: after, Limit: 500})
			if err != nil {
				return logs, fmt.Errorf("the event log of %s: %w", a.id, err)
			}
			if len(feed.Items) == 0 {
				break
			}
			for _, e := range feed.Items {
				l.Events = append(l.Events, logEvent(e))
			}
			after = feed.NextAfter
		}
		logs = append(logs, l)
	}
	return logs, nil
}

func logEvent(e client.Event) histcheck.LogEvent {
	le := histcheck.LogEvent{Seq: e.Seq, RegistrationID: e.RegistrationID, Type: e.Type, To: string(e.To), Seats: e.Seats,
		Actor: e.Actor, At: e.At, Reason: e.Reason, ListID: e.ListID, Forced: e.Forced}
	if e.From != nil {
		le.From = string(*e.From)
	}
	if e.RequestID != nil {
		le.RequestID = *e.RequestID
	}
	return le
}

// Lifecycle counts what a history did with confirmations and releases.
type Lifecycle struct {
	// Confirms answered, and how: Confirmed (200), Closed (409
	// confirmation_closed) or Invalid (409 invalid_transition).
	Confirms, Confirmed, Closed, Invalid int
	// Releases are the service's release operations, Released the
	// registrations they released and Promoted those they promoted.
	Releases, Released, Promoted int
}

// LifecycleOf counts the confirmations and releases of h.
func LifecycleOf(h history.History) Lifecycle {
	var c Lifecycle
	for _, op := range h.Ops {
		if op.Result != history.Answered || op.Output.Status >= 500 {
			continue
		}
		switch op.Kind {
		case histcheck.Confirm:
			c.Confirms++
			switch {
			case op.Output.Status == http.StatusOK:
				c.Confirmed++
			case op.Output.Code == "confirmation_closed":
				c.Closed++
			case op.Output.Code == "invalid_transition":
				c.Invalid++
			}
		case histcheck.Release:
			released, promoted := histcheck.ReleaseOf(op.Output)
			c.Releases, c.Released, c.Promoted = c.Releases+1, c.Released+len(released), c.Promoted+len(promoted)
		}
	}
	return c
}
