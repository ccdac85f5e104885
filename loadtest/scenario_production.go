package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/client"
)

// productionClients is the concurrency of production, signup_hot's.
const productionClients = 64

// Sizing production from signup_hot's rate in the same run (or
// signupHotDefaultRate without one): it is expected to run at
// productionShareOfSignupHot of it (it was measured at 0.3 to 0.65 of it
// on a busy machine). A quarter of the signups expected find a free seat,
// so that its timed part admits, then waitlists, even at a quarter of the
// rate expected. It pre-signs as many tokens as signup_hot made signups
// in as long (each RS256 signature costs the load test about a
// millisecond of processor time): only a production faster than
// signup_hot ends early.
const (
	productionShareOfSignupHot = 0.3
	signupHotDefaultRate       = 2000
)

// productionEnv are the settings production adds to the bench service's:
// an identity provider's JWK Set (with its iss and aud) and the access
// log at info, as a real deployment runs.
func productionEnv(idp *identityProvider) []string {
	return []string{"JWT_JWKS_URL=" + idp.jwksURL, "JWT_ISSUER=" + idpIssuer, "JWT_AUDIENCE=" + idpAudience, "LOG_LEVEL=info"}
}

// productionSizes returns the seats production leaves free on the hot
// activity (at least 1) and the tokens it signs (at least twice its
// warm-up's) for a timed part of d, from the run's signup_hot (nil: not
// measured).
func productionSizes(signupHot *ScenarioResult, d time.Duration) (free, tokens int) {
	rate := float64(signupHotDefaultRate)
	if signupHot != nil && signupHot.Ops > 0 {
		rate = signupHot.RPS
	}
	expected := rate * productionShareOfSignupHot * d.Seconds()
	return max(1, int(math.Round(expected/4))), max(2*productionWarmups, int(math.Ceil(rate*d.Seconds())))
}

// hotSettings are the hot activity's capacity and waiting list.
type hotSettings struct {
	capacity int
	waitlist bool
}

// production is signup_hot as a real deployment runs it: RS256 tokens of
// an identity provider, checked against its JWK Set (served by the load
// test on the loopback interface; the tokens pre-signed before the timed
// part), the access log at info, two webhooks for every event, and a
// waiting list on the hot activity, with a quarter of the signups expected
// free (productionSizes): the signups past them are waitlisted. It runs on
// a capacityd started with those settings, then puts the hot activity
// and the bench's usual capacityd back.
func (b *bench) production(ctx context.Context) (err error) {
	if b.cfg.ServiceURL != "" {
		b.report.Scenarios[ScenarioProduction] = &ScenarioResult{
			Note: "skipped: it starts a capacityd of its own, with the load test's JWK Set (not with -url)"}
		return nil
	}
	idp, err := startIdentityProvider()
	if err != nil {
		return err
	}
	defer idp.close()
	free, n := productionSizes(b.report.Scenarios[ScenarioSignupHot], b.cfg.ScenarioDuration)
	t0 := time.Now()
	toks, err := idp.signMany(n, func(i int) string { return b.user(ScenarioProduction, i) }, 2*time.Hour)
	if err != nil {
		return err
	}
	admin, err := idp.sign("loadtest-admin", true, 2*time.Hour)
	if err != nil {
		return fmt.Errorf("loadtest: sign an RS256 admin token: %w", err)
	}
	fmt.Fprintf(b.log, "%-16s %d RS256 tokens signed (%s)\n", ScenarioProduction, len(toks), time.Since(t0).Round(time.Millisecond))

	saved, err := b.readHotSettings(ctx)
	if err != nil {
		return err
	}
	b.stopService()
	normalAdmin := b.admin
	defer func() {
		// Back to the bench's usual capacityd and hot activity, whatever
		// happened.
		b.stopService()
		b.admin = normalAdmin
		bg := context.WithoutCancel(ctx)
		err = errors.Join(err, b.resetHot(bg), b.writeHotSettings(bg, saved), b.startService(bg, "", "NOTE_COMBINING=on"))
	}()
	if err := b.writeHotSettings(ctx, hotSettings{capacity: b.seed.Scale.HotOccupying() + free, waitlist: true}); err != nil {
		return err
	}
	if err := b.startService(ctx, "", append([]string{"NOTE_COMBINING=on"}, productionEnv(idp)...)...); err != nil {
		return err
	}
	b.admin = admin
	if err := b.warmProduction(ctx, toks); err != nil {
		return err
	}
	return b.driveProduction(ctx, toks, free)
}

// productionWarmups is the number of signups that warm production's
// fresh capacityd up before its timed part.
const productionWarmups = 4 * productionClients

// warmProduction signs the first productionWarmups users of toks up for
// an activity of its own from 64 clients, untimed, before any webhook is
// subscribed: the fresh capacityd opens its connections to PostgreSQL and
// prepares its statements, and has checked RS256 tokens, before the timed
// part, as signup_hot's capacityd has when it begins. The same users sign
// up for the hot activity afterwards.
func (b *bench) warmProduction(ctx context.Context, toks []string) error {
	a, err := b.api.WithToken(b.admin).CreateActivity(ctx, client.NewActivity{Title: "Production warm-up " + b.nonce, Capacity: 1000000})
	if err != nil {
		return fmt.Errorf("loadtest: create production's warm-up activity: %w", err)
	}
	n := min(productionWarmups, len(toks))
	out := b.drive(ctx, Load{Name: "setup:production_warmup", Clients: productionClients, Duration: 2 * time.Minute, MaxOps: int64(n)},
		func(ctx context.Context, _ int, i int64) error {
			return b.signupAdmitted(ctx, toks[i], a.ID)
		})
	if out.Errors > 0 || out.Ops < int64(n) {
		return fmt.Errorf("warm-up of %s: %d of %d signups admitted: %v", ScenarioProduction, out.Ops, n, out.FirstError)
	}
	return nil
}

// driveProduction is production's load, on a capacityd that runs with its
// settings.
func (b *bench) driveProduction(ctx context.Context, toks []string, free int) error {
	hooks, closeHooks, err := b.subscribeHooks(ctx, ScenarioProduction, 2)
	if err != nil {
		return err
	}
	defer closeHooks()
	hot := b.seed.HotActivity
	if err := b.warmSeats(ctx, hot); err != nil {
		return err
	}
	var admitted, waitlisted atomic.Int64
	// As in signup_hot_webhooks, the deliveries the signups caused count
	// in their processor time and WAL: the load settles once they drained.
	var (
		drained bool
		took    time.Duration
	)
	settle := func(ctx context.Context) (err error) {
		stopped := time.Now()
		drained, err = b.waitDeliveriesDrained(ctx)
		took = time.Since(stopped)
		return err
	}
	out := b.drive(ctx, Load{Name: ScenarioProduction, Clients: productionClients, Duration: b.cfg.ScenarioDuration, MaxOps: int64(len(toks)), Settle: settle},
		func(ctx context.Context, _ int, i int64) error {
			res, err := b.api.WithToken(toks[i]).Signup(ctx, hot, client.SignupOptions{})
			switch {
			case err != nil:
				return err
			case res.Waitlisted:
				waitlisted.Add(1)
			default:
				admitted.Add(1)
			}
			return nil
		})
	res := out.Result(productionClients)
	res.Note = fmt.Sprintf("%d seats free at the start: %d admitted (201), %d waitlisted (202)", free, admitted.Load(), waitlisted.Load())
	if out.Ops+out.Errors >= int64(len(toks)) {
		res.Note += fmt.Sprintf("; ended early, its %d pre-signed tokens used", len(toks))
	}
	b.report.Scenarios[ScenarioProduction] = res
	b.report.Checks[CheckProductionAdmitted] = admitted.Load()
	b.report.Checks[CheckProductionWaitlisted] = waitlisted.Load()
	received, dups := hooks.counts()
	fmt.Fprintf(b.log, "%-16s %s; deliveries drained: %v after %s; %d deliveries received, %d duplicates\n",
		ScenarioProduction, res.Note, drained, took.Round(10*time.Millisecond), received, dups)
	return nil
}

// readHotSettings reads the hot activity's capacity and waiting list.
func (b *bench) readHotSettings(ctx context.Context) (hotSettings, error) {
	var s hotSettings
	if err := b.db.QueryRow(ctx, `SELECT capacity, waitlist FROM activity WHERE id = $1`, b.seed.HotID).Scan(&s.capacity, &s.waitlist); err != nil {
		return s, fatalError{fmt.Errorf("loadtest: read the hot activity: %w", err)}
	}
	return s, nil
}

// writeHotSettings sets the hot activity's capacity and waiting list in
// the bench database, while no capacityd runs, and drops its display
// counter (which holds them; rebuilt from the authority on the next
// signup).
func (b *bench) writeHotSettings(ctx context.Context, s hotSettings) error {
	if _, err := b.db.Exec(ctx, `UPDATE activity SET capacity = $2, waitlist = $3, updated_at = now() WHERE id = $1`,
		b.seed.HotID, s.capacity, s.waitlist); err != nil {
		return fatalError{fmt.Errorf("loadtest: set the hot activity's capacity: %w", err)}
	}
	if b.rdb != nil {
		if err := b.rdb.Del(ctx, capacity.Key(b.seed.HotActivity)).Err(); err != nil {
			return fatalError{fmt.Errorf("loadtest: drop the hot counter: %w", err)}
		}
	}
	return nil
}
