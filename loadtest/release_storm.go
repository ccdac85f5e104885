package loadtest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// stormWatch is what the poll of the authority saw of a release storm:
// when each activity had recorded its storm's events (its seq base+want),
// and when the first one moved.
type stormWatch struct {
	ids    []string
	base   []int64
	want   int64
	moment time.Time
	// refilled is when each activity was seen done (zero: never within
	// releaseTimeout); moved when any was first seen changed.
	refilled []time.Time
	moved    time.Time
}

func newStormWatch(ids []string, base []int64, moment time.Time, want int) *stormWatch {
	return &stormWatch{ids: ids, base: base, want: int64(want), moment: moment, refilled: make([]time.Time, len(ids))}
}

// poll reads the activities' seqs every releasePoll until each is done
// and releaseFixed has passed since the moment, or releaseTimeout after
// the moment, then calls done.
func (s *stormWatch) poll(ctx context.Context, b *bench, done func()) error {
	defer done()
	tick := time.NewTicker(releasePoll)
	defer tick.Stop()
	for {
		seqs, err := b.lastSeqs(ctx, s.ids)
		if err != nil {
			return err
		}
		now := time.Now()
		left := 0
		for i, seq := range seqs {
			if seq > s.base[i] && s.moved.IsZero() {
				s.moved = now
			}
			if seq >= s.base[i]+s.want && s.refilled[i].IsZero() {
				s.refilled[i] = now
			}
			if s.refilled[i].IsZero() {
				left++
			}
		}
		if (left == 0 && !now.Before(s.moment.Add(releaseFixed))) || now.After(s.moment.Add(releaseTimeout)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// last returns when the last activity was seen refilled (zero: one was
// not).
func (s *stormWatch) last() time.Time {
	var t time.Time
	for _, r := range s.refilled {
		if r.IsZero() {
			return time.Time{}
		}
		if r.After(t) {
			t = r
		}
	}
	return t
}

// stamp is a bystander's signup: when its answer came and how long it
// took.
type stamp struct {
	end time.Time
	lat time.Duration
}

// stormSignups signs the stage's bystanders up for their activity from
// 64 clients from now until the storm is over (or not, releaseTimeout
// after the moment), while the storm is watched, and returns each
// client's signups.
func (b *bench) stormSignups(ctx context.Context, st releaseStage, storm *stormWatch) [][]stamp {
	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	var pollErr error
	var wg sync.WaitGroup
	wg.Go(func() { pollErr = storm.poll(loadCtx, b, stop) })
	stamps := make([][]stamp, releaseClients)
	// The whole load's processor time and WAL are in the log only: the
	// report's figures are of its windows.
	b.drive(loadCtx, Load{Name: ScenarioReleaseStormSignups, Clients: releaseClients, Duration: time.Until(storm.moment.Add(releaseTimeout))},
		func(ctx context.Context, worker int, i int64) error {
			tok := ""
			if i < int64(len(st.toks)) {
				tok = st.toks[i]
			} else {
				var err error
				if tok, err = b.auth.Sign(b.user(ScenarioReleaseStormSignups, int(i)), false, 2*time.Hour); err != nil {
					return err
				}
			}
			t0 := time.Now()
			if err := b.signupAdmitted(ctx, tok, st.bystander); err != nil {
				return err
			}
			now := time.Now()
			stamps[worker] = append(stamps[worker], stamp{end: now, lat: now.Sub(t0)})
			return nil
		})
	wg.Wait()
	if pollErr != nil && ctx.Err() == nil {
		fmt.Fprintf(b.log, "%-16s the poll of the authority ended: %v\n", ScenarioReleaseStorm, pollErr)
	}
	return stamps
}

// windowResult is the signups whose answers came from from until to.
func windowResult(stamps [][]stamp, from, to time.Time) *ScenarioResult {
	lat := NewLatencies()
	var ops int64
	for _, w := range stamps {
		for _, s := range w {
			if !s.end.Before(from) && !s.end.After(to) {
				lat.Record(s.lat)
				ops++
			}
		}
	}
	secs := to.Sub(from).Seconds()
	r := &ScenarioResult{P50MS: lat.QuantileMS(50), P95MS: lat.QuantileMS(95), P99MS: lat.QuantileMS(99), MaxMS: lat.MaxMS(),
		Ops: ops, Clients: releaseClients, Seconds: round(secs, 3)}
	if secs > 0 {
		r.RPS = round(float64(ops)/secs, 1)
	}
	return r
}

// stormVerdict is what the feeds and counts of a release storm's
// activities say afterwards.
type stormVerdict struct {
	// released counts the registration.released events of a no-show, by
	// the rule no_show, by the service, at or after the moment, once;
	// wrong every other release, and every no-show left unreleased.
	released, wrong int64
	// refilled counts the promotions of the first in line, in order;
	// inTx those recorded right after the releases of their transaction
	// (same transaction time, the service's, no request: the feed says
	// null or "").
	refilled, inTx int64
	// inexact counts the activities whose taken or waiting afterwards is
	// not what the storm leaves.
	inexact int64
	// starts are the release transactions' times; first the earliest.
	starts map[time.Time]bool
	first  time.Time
}

// transactionEvery is the mean time between the starts of the release
// transactions, one after the other (0: fewer than two).
func (v stormVerdict) transactionEvery() time.Duration {
	if len(v.starts) < 2 {
		return 0
	}
	var last time.Time
	for t := range v.starts {
		if t.After(last) {
			last = t
		}
	}
	return last.Sub(v.first) / time.Duration(len(v.starts)-1)
}

// judgeStorm judges one activity's feed (in seq order): noShows are its
// seated registrations without a check-in, line its waiting ones in line
// order.
func (v *stormVerdict) judgeStorm(events []client.Event, noShows map[string]bool, line []string, moment time.Time) {
	seen := map[string]bool{}
	var txAt time.Time
	inRelease, promoted := false, 0
	for _, e := range events {
		switch e.Type {
		case eventReleased:
			ok := noShows[e.RegistrationID] && !seen[e.RegistrationID] && e.Reason == client.CancelReasonNoShow &&
				e.Actor == actorSystem && !e.At.Before(moment)
			seen[e.RegistrationID] = true
			if ok {
				v.released++
			} else {
				v.wrong++
			}
			v.starts[e.At] = true
			if v.first.IsZero() || e.At.Before(v.first) {
				v.first = e.At
			}
			txAt, inRelease = e.At, true
		case eventPromoted:
			if promoted < len(line) && e.RegistrationID == line[promoted] {
				v.refilled++
			}
			promoted++
			if inRelease && e.At.Equal(txAt) && e.Actor == actorSystem && (e.RequestID == nil || *e.RequestID == "") {
				v.inTx++
			} else {
				inRelease = false
			}
		default:
			inRelease = false
		}
	}
	for id := range noShows {
		if !seen[id] {
			v.wrong++
		}
	}
}

// Event types and the actor release_storm reads.
const (
	eventReleased = "registration.released"
	actorSystem   = "system"
)

// reportReleaseStorm judges the storm from the activities' feeds and
// counts and reports it.
func (b *bench) reportReleaseStorm(ctx context.Context, st releaseStage, storm *stormWatch, stamps [][]stamp) error {
	v := stormVerdict{starts: map[time.Time]bool{}}
	admin := b.api.WithToken(b.admin)
	keeps := releaseWaiting - min(releaseNoShows, releaseWaiting)
	for i, id := range st.ids {
		events, err := b.feed(ctx, id)
		if err != nil {
			return err
		}
		v.judgeStorm(events, st.noShows[i], st.lines[i], storm.moment)
		a, err := admin.GetActivity(ctx, id)
		if err != nil {
			return fmt.Errorf("loadtest: read a release storm's activity: %w", err)
		}
		if a.Taken != releaseSeats || a.Waiting != keeps {
			v.inexact++
		}
	}
	n := len(st.ids)
	ms := make([]float64, 0, n)
	for _, r := range storm.refilled {
		if !r.IsZero() {
			ms = append(ms, float64(r.Sub(storm.moment).Microseconds())/1000)
		}
	}
	slices.Sort(ms)
	res := &ScenarioResult{Ops: v.released, Clients: 1, Errors: int64(n - len(ms)), P50MS: nearestRank(ms, 50), P95MS: nearestRank(ms, 95),
		P99MS: nearestRank(ms, 99), MaxMS: nearestRank(ms, 100),
		Note: sizeNote("%d activities", [2]int{n, FullSizes.ReleaseActivities})}
	end := storm.last()
	if !end.IsZero() {
		res.Seconds = round(end.Sub(storm.moment).Seconds(), 3)
		res.RPS = round(float64(v.released)/end.Sub(storm.moment).Seconds(), 1)
	} else {
		res.Note = joinNote(res.Note, fmt.Sprintf("%d of %d activities not refilled within %s of the moment", n-len(ms), n, releaseTimeout))
		end = storm.moment.Add(releaseTimeout)
	}
	b.report.Scenarios[ScenarioReleaseStorm] = res
	from := storm.moment
	if !v.first.IsZero() {
		from = v.first
	}
	b.reportStormSignups(stamps, storm.moment, from, end)

	ch := b.report.Checks
	ch[CheckReleaseActivities] = int64(n)
	ch[CheckReleaseNoShows] = int64(n * releaseNoShows)
	ch[CheckReleaseReleased], ch[CheckReleaseWrong] = v.released, v.wrong
	ch[CheckReleaseRefilled], ch[CheckReleaseInTx] = v.refilled, v.inTx
	ch[CheckReleaseInexact] = v.inexact
	ch[CheckReleaseTransactions] = int64(len(v.starts))
	every := v.transactionEvery()
	if every > 0 {
		ch[CheckReleaseTxEveryMS] = round(float64(every.Microseconds())/1000, 1)
	}
	if len(ms) == n {
		ch[CheckReleaseP99MS] = res.P99MS
	}
	if !v.first.IsZero() {
		ch[CheckReleaseWaitMS] = round(float64(v.first.Sub(storm.moment).Microseconds())/1000, 1)
		ch[CheckReleaseWorkMS] = round(float64(end.Sub(v.first).Microseconds())/1000, 1)
	}
	fmt.Fprintf(b.log, "%-16s %d activities: %d of %d no-shows released (%d wrong or missed), %d refilled in line order, %d promoted in the releasing transaction, "+
		"%d activities inexact, %d release transactions, one begun every %v; from the moment: first release transaction %v, refilled p50 %.0f ms, p99 %.0f ms, max %.0f ms "+
		"(first change seen %v); signups/s on another activity %.0f before, %.0f during\n",
		ScenarioReleaseStorm, n, v.released, n*releaseNoShows, v.wrong, v.refilled, v.inTx, v.inexact, len(v.starts), every.Round(time.Millisecond),
		v.first.Sub(storm.moment).Round(time.Millisecond), res.P50MS, res.P99MS, res.MaxMS, storm.moved.Sub(storm.moment).Round(time.Millisecond),
		b.report.Scenarios[ScenarioReleaseStormBefore].RPS, b.report.Scenarios[ScenarioReleaseStormSignups].RPS)
	return nil
}

// reportStormSignups reports the bystanders' signups: in the window of
// releaseBefore before the moment (their rate without a storm), in the
// storm's window from from (its first release transaction) until end (the
// last refill), and in the fixed window of releaseFixed from the moment.
// The storm's window shrinks as the release work gets denser, so its
// ratio to before says how hard the storm pressed while it lasted; the
// signups it cost the bystanders (the rate before over the storm's window,
// less those answered in it) and the ratio over the fixed window, the same
// length whatever the storm's, say what it cost them in all.
func (b *bench) reportStormSignups(stamps [][]stamp, moment, from, end time.Time) {
	before := windowResult(stamps, moment.Add(-releaseBefore), moment)
	during := windowResult(stamps, from, end)
	fixed := windowResult(stamps, moment, moment.Add(releaseFixed))
	b.report.Scenarios[ScenarioReleaseStormBefore] = before
	b.report.Scenarios[ScenarioReleaseStormSignups] = during
	ch := b.report.Checks
	ch[CheckReleaseSignupsLost] = round(before.RPS*during.Seconds-float64(during.Ops), 0)
	if r := ratio(Num(fixed.RPS), Num(before.RPS)); r != nil {
		ch[CheckReleaseFixedVsBefore] = *r
	}
	fmt.Fprintf(b.log, "%-16s bystanders: %.0f/s (p99 %.1f ms) before; %.0f/s (p99 %.1f ms) over %.3f s from the first release transaction "+
		"to the last refill, %.0f signups lost; %.0f/s (p99 %.1f ms) in the %v from the moment\n",
		ScenarioReleaseStorm, before.RPS, before.P99MS, during.RPS, during.P99MS, during.Seconds, ch[CheckReleaseSignupsLost],
		fixed.RPS, fixed.P99MS, releaseFixed)
}

// nearestRank returns the q-th percentile (0–100) of sorted values by the
// nearest rank (0: none).
func nearestRank(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(float64(len(sorted))*q/100)) - 1
	return round(sorted[min(max(k, 0), len(sorted)-1)], 1)
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
