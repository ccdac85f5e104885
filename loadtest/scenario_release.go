package loadtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// release_storm's shape: Sizes.ReleaseActivities activities (20) of
// releaseSeats seats, each with releaseNoShows of its seated not checked
// in and releaseWaiting waiting, all released at one moment, while
// releaseClients sign distinct users up for another activity.
const (
	releaseSeats   = 100
	releaseNoShows = 60
	releaseWaiting = 80
	releaseClients = 64
	// releasePatches is the time given to the patches that set the
	// moment; the signups then run releaseWarm before the window of
	// releaseBefore that ends at the moment, their rate without a storm.
	releasePatches = 2 * time.Second
	releaseWarm    = time.Second
	releaseBefore  = 3 * time.Second
	// releaseFixed is the bystanders' window of a fixed length from the
	// moment (the storm's target), whatever the storm's length: the
	// signups run at least until it ends.
	releaseFixed = 2 * time.Second
	// releaseTimeout bounds the wait for the storm after the moment, and
	// releasePoll is how often the authority's seqs are read meanwhile.
	releaseTimeout = 30 * time.Second
	releasePoll    = 5 * time.Millisecond
	// releaseExpiry is the due work's tick of the capacityd the storm runs
	// on: the default, as a deployment runs it (the bench's usual
	// capacityd runs it hourly, to keep background work out of the other
	// scenarios).
	releaseExpiry = "EXPIRY_INTERVAL=1s"
	// releaseSetupTimeout bounds each untimed setup load.
	releaseSetupTimeout = 2 * time.Minute
)

// releaseStorm is the release of no-shows' seats at the door of a large
// event: on a capacityd restarted with the due work every second, it
// fills Sizes.ReleaseActivities activities (20) of 100 seats with 100
// seated and 80 waiting each and checks 40 of each one's seated in at one
// list (untimed), then sets every activity's start to one moment with
// release_no_shows_after_minutes 0. From before the moment until the last
// line is refilled (and releaseFixed after the moment), 64 clients sign
// distinct users up for another activity, and the authority's seqs are
// read every 5 ms. It reports the
// time from the moment until each activity's line was refilled (p50, p99
// and max across activities), the signups during the storm against those
// just before the moment, the release transactions, and whether exactly
// the no-shows were released and the first in line promoted in the
// releasing transaction (from the event feeds and the activities' counts).
// Then the usual capacityd is started again.
func (b *bench) releaseStorm(ctx context.Context) (err error) {
	if b.cfg.ServiceURL != "" {
		b.report.Scenarios[ScenarioReleaseStorm] = &ScenarioResult{
			Note: "skipped: it starts a capacityd of its own with the due work every second (not with -url)"}
		return nil
	}
	b.stopService()
	defer func() {
		b.stopService()
		err = errors.Join(err, b.startService(context.WithoutCancel(ctx), "", "NOTE_COMBINING=on"))
	}()
	if err := b.startService(ctx, "", "NOTE_COMBINING=on", releaseExpiry); err != nil {
		return err
	}
	return b.driveReleaseStorm(ctx)
}

// releaseStage is release_storm's activities as the setup left them.
type releaseStage struct {
	ids []string
	// noShows are each activity's seated registrations without a
	// check-in; lines its waiting ones, in line order.
	noShows   []map[string]bool
	lines     [][]string
	bystander string
	toks      []string
}

// driveReleaseStorm is release_storm on the capacityd running, whose due
// work runs every second.
func (b *bench) driveReleaseStorm(ctx context.Context) error {
	st, err := b.stageReleaseStorm(ctx, b.cfg.ReleaseActivities)
	if err != nil {
		return err
	}
	moment := time.Now().Add(releasePatches + releaseWarm + releaseBefore).UTC().Truncate(time.Microsecond)
	admin := b.api.WithToken(b.admin)
	zero := 0
	for _, id := range st.ids {
		if _, err := admin.UpdateActivity(ctx, id, client.ActivityPatch{StartsAt: &moment, ReleaseNoShowsAfterMinutes: &zero}); err != nil {
			return fmt.Errorf("loadtest: set the storm's moment: %w", err)
		}
	}
	if late := time.Until(moment.Add(-releaseBefore)); late < 0 {
		return fmt.Errorf("loadtest: the storm's patches ended %s after its signups' window began", -late)
	}
	base, err := b.lastSeqs(ctx, st.ids)
	if err != nil {
		return err
	}
	storm := newStormWatch(st.ids, base, moment, releaseNoShows+min(releaseNoShows, releaseWaiting))
	signups := b.stormSignups(ctx, st, storm)
	return b.reportReleaseStorm(ctx, st, storm, signups)
}

// stageReleaseStorm creates the storm's activities and fills them, checks
// 40 of each one's seated in, and creates the bystanders' activity and
// tokens, untimed.
func (b *bench) stageReleaseStorm(ctx context.Context, n int) (releaseStage, error) {
	admin := b.api.WithToken(b.admin)
	st := releaseStage{ids: make([]string, n), noShows: make([]map[string]bool, n), lines: make([][]string, n)}
	for i := range st.ids {
		a, err := admin.CreateActivity(ctx, client.NewActivity{Title: fmt.Sprintf("Release storm %s %d", b.nonce, i+1),
			Capacity: releaseSeats, Waitlist: true})
		if err != nil {
			return st, fmt.Errorf("loadtest: create a release storm's activity: %w", err)
		}
		st.ids[i] = a.ID
	}
	seated, waiting, err := b.fillReleaseStorm(ctx, st.ids)
	if err != nil {
		return st, err
	}
	list, err := admin.CreateCheckinList(ctx, client.NewCheckinList{Name: "Release storm " + b.nonce, ActivityIDs: st.ids,
		Entry: client.EntryOnce})
	if err != nil {
		return st, fmt.Errorf("loadtest: create the release storm's check-in list: %w", err)
	}
	var came []string
	for i := range st.ids {
		st.noShows[i] = map[string]bool{}
		for k, id := range seated[i] {
			if k < releaseSeats-releaseNoShows {
				came = append(came, id)
			} else {
				st.noShows[i][id] = true
			}
		}
		if st.lines[i], err = inLine(waiting[i]); err != nil {
			return st, err
		}
	}
	out := b.drive(ctx, Load{Name: "setup:release_checkins", Clients: releaseClients, Duration: releaseSetupTimeout, MaxOps: int64(len(came))},
		func(ctx context.Context, _ int, i int64) error {
			r, err := admin.Redeem(ctx, list.ID, client.RedeemRequest{RegistrationID: came[i], Device: "storm"},
				fmt.Sprintf("lt-%s-storm-%d", b.nonce, i))
			if err == nil && r.Result != "entered" {
				err = fmt.Errorf("check-in of %s: %q", came[i], r.Result)
			}
			return err
		})
	if out.Errors > 0 || out.Ops < int64(len(came)) {
		return st, fmt.Errorf("loadtest: %d of %d release storm check-ins: %v", out.Ops, len(came), out.FirstError)
	}
	a, err := admin.CreateActivity(ctx, client.NewActivity{Title: "Release storm bystanders " + b.nonce, Capacity: 1000000})
	if err != nil {
		return st, fmt.Errorf("loadtest: create the release storm's bystanders' activity: %w", err)
	}
	st.bystander = a.ID
	if st.toks, err = b.tokens(ScenarioReleaseStormSignups, b.maxStormSignups()); err != nil {
		return st, err
	}
	return st, b.warmSeats(ctx, st.bystander)
}

// maxStormSignups is how many tokens the storm's bystanders are given
// ahead: as many as signup_hot's ceiling for the warm-up and the window
// before the moment and as long again; more are signed as needed.
func (b *bench) maxStormSignups() int {
	return int((releaseWarm+2*releaseBefore).Seconds()*maxSignupRate) + 1000
}

// fillReleaseStorm signs 180 distinct users up for each activity, from
// 64 clients, the activities in turn, untimed, and returns each
// activity's seated registrations and its waiting ones.
func (b *bench) fillReleaseStorm(ctx context.Context, ids []string) (seated [][]string, waiting [][]client.Registration, err error) {
	per := releaseSeats + releaseWaiting
	total := len(ids) * per
	toks, err := b.tokens("release_storm_crowd", total)
	if err != nil {
		return nil, nil, err
	}
	res := make([]client.SignupResult, total)
	out := b.drive(ctx, Load{Name: "setup:release_storm", Clients: releaseClients, Duration: releaseSetupTimeout, MaxOps: int64(total)},
		func(ctx context.Context, _ int, i int64) error {
			var err error
			res[i], err = b.api.WithToken(toks[i]).Signup(ctx, ids[i%int64(len(ids))], client.SignupOptions{})
			return err
		})
	if out.Errors > 0 || out.Ops < int64(total) {
		return nil, nil, fmt.Errorf("loadtest: %d of %d release storm signups: %v", out.Ops, total, out.FirstError)
	}
	seated, waiting = make([][]string, len(ids)), make([][]client.Registration, len(ids))
	for i, r := range res {
		a := i % len(ids)
		if r.Waitlisted {
			waiting[a] = append(waiting[a], r.Registration)
		} else {
			seated[a] = append(seated[a], r.Registration.ID)
		}
	}
	for a := range ids {
		if len(seated[a]) != releaseSeats || len(waiting[a]) != releaseWaiting {
			return nil, nil, fmt.Errorf("loadtest: release storm activity %s: %d seated and %d waiting, want %d and %d",
				ids[a], len(seated[a]), len(waiting[a]), releaseSeats, releaseWaiting)
		}
	}
	return seated, waiting, nil
}

// lastSeqs reads the activities' last event seqs at the authority.
func (b *bench) lastSeqs(ctx context.Context, ids []string) ([]int64, error) {
	rows, err := b.db.Query(ctx, `SELECT coalesce(s.last_seq, 0) FROM unnest($1::text[]) WITH ORDINALITY AS x(public_id, k)
		JOIN activity a ON a.public_id = x.public_id LEFT JOIN activity_state s ON s.activity_id = a.id ORDER BY x.k`, ids)
	if err != nil {
		return nil, fatalError{fmt.Errorf("loadtest: read the activities' seqs: %w", err)}
	}
	defer rows.Close()
	var seqs []int64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			return nil, fatalError{fmt.Errorf("loadtest: read the activities' seqs: %w", err)}
		}
		seqs = append(seqs, s)
	}
	if err := rows.Err(); err != nil || len(seqs) != len(ids) {
		return nil, fatalError{fmt.Errorf("loadtest: read the seqs of %d of %d activities: %v", len(seqs), len(ids), err)}
	}
	return seqs, nil
}
