package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// Event types the waiting-list checks read from an activity's feed.
const (
	eventCancelled = "registration.cancelled"
	eventPromoted  = "registration.promoted"
)

// promoteClients is the concurrency of promote_storm's cancellations and of
// its untimed setup.
const promoteClients = 64

// flashCrowdWaitlist is flash_crowd on an activity with a waiting list:
// Sizes.WaitlistCrowdUsers distinct users (20,000), once each, for 500
// seats from 256 clients. Exactly 500 must be admitted (201) and every
// other one waitlisted (202) at a position of their own; none answered 5xx.
func (b *bench) flashCrowdWaitlist(ctx context.Context) error {
	users := b.cfg.WaitlistCrowdUsers
	c, err := b.crowd(ctx, ScenarioWaitCrowd, users, FullSizes.WaitlistCrowdUsers, true)
	if err != nil {
		return err
	}
	ch := b.report.Checks
	ch[CheckWaitUsers] = int64(users)
	ch[CheckWaitAdmitted] = c.answers.count(http.StatusCreated)
	ch[CheckWaitWaitlisted] = c.answers.count(http.StatusAccepted)
	ch[CheckWaitPositions] = distinctPositions(c.positions)
	ch[CheckWait5xx] = c.answers.fivexx()
	ch[CheckWaitAdmissionTx] = c.tx
	ch[CheckWaitTaken] = int64(c.activity.Taken)
	ch[CheckWaitWaiting] = int64(c.activity.Waiting)
	fmt.Fprintf(b.log, "%-16s admitted %d, waitlisted %d at %d distinct positions, 5xx %d, authority taken %d waiting %d, admission transactions %d\n",
		ScenarioWaitCrowd, ch[CheckWaitAdmitted], ch[CheckWaitWaitlisted], ch[CheckWaitPositions], ch[CheckWait5xx],
		c.activity.Taken, c.activity.Waiting, c.tx)
	return nil
}

// distinctPositions counts the distinct waiting-list positions (0: none).
func distinctPositions(positions []int32) int64 {
	seen := make(map[int32]bool, len(positions))
	for _, p := range positions {
		if p > 0 {
			seen[p] = true
		}
	}
	return int64(len(seen))
}

// promoteStorm runs Sizes.PromoteRounds (5) storms one after another, each
// on an activity of its own, and reports them as one scenario: their
// cancellations over their summed timed parts, and their checks summed.
// One storm lasts a fraction of a second, so that a moment's stall of the
// machine would otherwise move its rate by tens of percent.
func (b *bench) promoteStorm(ctx context.Context) error {
	var total Outcome
	var seen stormCheck
	for round := range b.cfg.PromoteRounds {
		out, c, err := b.promoteRound(ctx, round)
		if err != nil {
			return err
		}
		total.Add(out)
		seen.add(c)
	}
	seats, waiting, rounds := b.cfg.PromoteCancels, b.cfg.PromoteWaiting, b.cfg.PromoteRounds
	res := total.Result(promoteClients)
	res.Note = sizeNote("%d storms of %d seats and %d waiting",
		[2]int{rounds, FullSizes.PromoteRounds}, [2]int{seats, FullSizes.PromoteCancels}, [2]int{waiting, FullSizes.PromoteWaiting})
	b.report.Scenarios[ScenarioPromoteStorm] = res
	ch := b.report.Checks
	ch[CheckPromoteSeats] = int64(rounds * seats)
	ch[CheckPromoteWaitingBefore] = int64(rounds * waiting)
	ch[CheckPromoteCancelled] = total.Ops
	ch[CheckPromoteTaken], ch[CheckPromoteWaiting] = seen.taken, seen.waiting
	ch[CheckPromotePromoted], ch[CheckPromoteInLine], ch[CheckPromoteWithCancel] = seen.promoted, seen.inLine, seen.withCancel
	fmt.Fprintf(b.log, "%-16s %d storms: taken %d of %d, waiting %d of %d; %d promoted, %d of them first in line in order, %d recorded with the cancellation that freed the seat\n",
		ScenarioPromoteStorm, rounds, seen.taken, rounds*seats, seen.waiting, rounds*waiting, seen.promoted, seen.inLine, seen.withCancel)
	return nil
}

// promoteRound is one storm: it fills an activity that keeps a waiting
// list (Sizes.PromoteCancels seats, 1,000) and lines Sizes.PromoteWaiting
// users (5,000) up behind it, untimed; then, timed, cancels every seat as
// an admin from 64 clients, each cancellation promoting the first in line
// in its own transaction; and reads what the activity and its event feed
// show afterwards.
func (b *bench) promoteRound(ctx context.Context, round int) (Outcome, stormCheck, error) {
	seats, waiting := b.cfg.PromoteCancels, b.cfg.PromoteWaiting
	a, err := b.api.WithToken(b.admin).CreateActivity(ctx, client.NewActivity{
		Title: fmt.Sprintf("Promote storm %d %s", round+1, b.nonce), Capacity: seats, Waitlist: true})
	if err != nil {
		return Outcome{}, stormCheck{}, fmt.Errorf("loadtest: create a promote storm's activity: %w", err)
	}
	name := fmt.Sprintf("promote_%d_", round+1)
	seated, err := b.fill(ctx, a.ID, name+"seated", seats, false)
	if err != nil {
		return Outcome{}, stormCheck{}, err
	}
	line, err := b.fill(ctx, a.ID, name+"line", waiting, true)
	if err != nil {
		return Outcome{}, stormCheck{}, err
	}
	out := b.cancelAll(ctx, fmt.Sprintf("%s %d", ScenarioPromoteStorm, round+1), promoteClients, 2*time.Minute, seated)
	c, err := b.checkPromotions(ctx, a.ID, line)
	return out, c, err
}

// fill signs n distinct users up for an activity from 64 clients, untimed,
// and returns their registrations: admitted ones in any order, or, when
// waitlisted, in line order. Any other outcome is an error.
func (b *bench) fill(ctx context.Context, activity, name string, n int, waitlisted bool) ([]string, error) {
	toks, err := b.tokens(name, n)
	if err != nil {
		return nil, err
	}
	regs := make([]client.Registration, n)
	out := b.drive(ctx, Load{Name: "setup:" + name, Clients: promoteClients, Duration: 2 * time.Minute, MaxOps: int64(n)},
		func(ctx context.Context, _ int, i int64) error {
			res, err := b.api.WithToken(toks[i]).Signup(ctx, activity, client.SignupOptions{})
			if err == nil && res.Waitlisted != waitlisted {
				err = fmt.Errorf("waitlisted %v, want %v", res.Waitlisted, waitlisted)
			}
			regs[i] = res.Registration
			return err
		})
	if out.Errors > 0 || out.Ops < int64(n) {
		return nil, fmt.Errorf("setup %s: %d of %d signups as expected: %v", name, out.Ops, n, out.FirstError)
	}
	if !waitlisted {
		return registrationIDs(regs), nil
	}
	return inLine(regs)
}

// registrationIDs returns the registrations' ids.
func registrationIDs(regs []client.Registration) []string {
	ids := make([]string, len(regs))
	for i, r := range regs {
		ids[i] = r.ID
	}
	return ids
}

// inLine orders waitlisted registrations by their positions, which must
// be 1..len(regs), each once.
func inLine(regs []client.Registration) ([]string, error) {
	line := make([]string, len(regs))
	for _, r := range regs {
		p := 0
		if r.WaitlistPosition != nil {
			p = *r.WaitlistPosition
		}
		if p < 1 || p > len(line) || line[p-1] != "" {
			return nil, fmt.Errorf("waitlist position %d of %s: not in 1..%d or given twice", p, r.ID, len(line))
		}
		line[p-1] = r.ID
	}
	return line, nil
}

// stormCheck is what a storm's activity and event feed show afterwards.
type stormCheck struct {
	taken, waiting int64
	promotions
}

// add adds c2's counts to c's.
func (c *stormCheck) add(c2 stormCheck) {
	c.taken, c.waiting = c.taken+c2.taken, c.waiting+c2.waiting
	c.promoted, c.inLine, c.withCancel = c.promoted+c2.promoted, c.inLine+c2.inLine, c.withCancel+c2.withCancel
}

// checkPromotions reads a storm's activity and its whole event feed
// afterwards.
func (b *bench) checkPromotions(ctx context.Context, activity string, line []string) (stormCheck, error) {
	a, err := b.api.WithToken(b.admin).GetActivity(ctx, activity)
	if err != nil {
		return stormCheck{}, fmt.Errorf("loadtest: read a promote storm's activity: %w", err)
	}
	events, err := b.feed(ctx, activity)
	if err != nil {
		return stormCheck{}, err
	}
	return stormCheck{taken: int64(a.Taken), waiting: int64(a.Waiting), promotions: judgePromotions(events, line)}, nil
}

// feed reads every event of an activity, in seq order (admin).
func (b *bench) feed(ctx context.Context, activity string) ([]client.Event, error) {
	admin := b.api.WithToken(b.admin)
	var all []client.Event
	after := int64(0)
	for {
		f, err := admin.ActivityEvents(ctx, activity, client.EventFeedOptions{After: after, Limit: 500})
		if err != nil {
			return nil, fmt.Errorf("loadtest: read the event feed: %w", err)
		}
		if len(f.Items) == 0 {
			return all, nil
		}
		all = append(all, f.Items...)
		after = f.NextAfter
	}
}

// promotions is what an activity's feed says of its promotions.
type promotions struct {
	// promoted counts registration.promoted events.
	promoted int64
	// inLine counts the k-th promotion going to the k-th in line.
	inLine int64
	// withCancel counts promotions recorded right after the cancellation
	// of a seat in the same request: decided in the cancellation's
	// transaction.
	withCancel int64
}

// judgePromotions reads the events (in seq order) against the line (the
// waiting registrations in line order).
func judgePromotions(events []client.Event, line []string) promotions {
	var p promotions
	for i, e := range events {
		if e.Type != eventPromoted {
			continue
		}
		if p.promoted < int64(len(line)) && e.RegistrationID == line[p.promoted] {
			p.inLine++
		}
		p.promoted++
		if i > 0 && freedBy(events[i-1], e) {
			p.withCancel++
		}
	}
	return p
}

// freedBy reports whether prev is the cancellation of a seat that
// promotion e filled, recorded by the same request.
func freedBy(prev, e client.Event) bool {
	return prev.Type == eventCancelled && prev.Seq == e.Seq-1 && prev.From != nil && *prev.From != client.Waitlisted &&
		prev.RequestID != nil && e.RequestID != nil && *prev.RequestID == *e.RequestID
}
