package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/physiciansnet/capacityd/client"
)

// On-sale sizes: the activity's seats and its queue's admission rate.
const (
	onSaleSeats = 2000
	onSaleRate  = 500
)

// onSale is an on-sale: Sizes.OnSaleUsers distinct users join the queue
// of an activity of 2,000 seats (admit_per_second 500, max_admitted 2,200:
// the seats, not the cap, bound the tokens at the end) before it opens,
// from 64 clients (onsale_join); the activity opens; 64 clients then poll
// the users' tickets round-robin (onsale_poll) while those admitted sign
// up with their tokens on the side; polling goes on until the activity is
// full. It checks fairness (the rank correlation of join order and
// position) and exactness (2,000 seats taken, one token per place, every
// registration admitted by a used token, no admitted signup refused).
func (b *bench) onSale(ctx context.Context) error {
	n := b.cfg.OnSaleUsers
	toks, err := b.tokens(ScenarioOnSaleJoin, n)
	if err != nil {
		return err
	}
	admin := b.api.WithToken(b.admin)
	later := time.Now().Add(time.Hour)
	act, err := admin.CreateActivity(ctx, client.NewActivity{Title: "load test on-sale", Capacity: onSaleSeats, OpensAt: &later,
		Queue: &client.QueueSettings{AdmitPerSecond: onSaleRate, MaxAdmitted: onSaleSeats + onSaleSeats/10, TokenSeconds: 600, AbsentSeconds: 600}})
	if err != nil {
		return fatalError{fmt.Errorf("loadtest: create the on-sale activity: %w", err)}
	}
	defer func() {
		// The line ends with the scenario: its queue removed, no instance
		// advances it any more.
		_, _ = admin.UpdateActivity(context.WithoutCancel(ctx), act.ID, client.ActivityPatch{ClearQueue: true})
	}()
	var fivexx, refused atomic.Int64
	count := func(err error) error {
		if e, ok := errors.AsType[*client.Error](err); ok && e.Status >= 500 {
			fivexx.Add(1)
		}
		return err
	}

	joins := b.drive(ctx, Load{Name: ScenarioOnSaleJoin, Clients: 64, Duration: 6 * b.cfg.ScenarioDuration, MaxOps: int64(n)},
		func(ctx context.Context, _ int, i int64) error {
			_, err := b.api.WithToken(toks[i]).JoinQueue(ctx, act.ID)
			return count(err)
		})
	b.report.Scenarios[ScenarioOnSaleJoin] = joins.Result(64)
	if joins.Ops < int64(n) {
		return fmt.Errorf("loadtest: %d of %d users joined the on-sale's queue: %v", joins.Ops, n, joins.FirstError)
	}
	now := time.Now()
	if _, err := admin.UpdateActivity(ctx, act.ID, client.ActivityPatch{OpensAt: &now}); err != nil {
		return fatalError{fmt.Errorf("loadtest: open the on-sale: %w", err)}
	}

	// Those admitted sign up on the side, so that the polls measure polls.
	admitted := make(chan onSaleAdmission, onSaleSeats)
	var signed sync.Map
	var signers sync.WaitGroup
	for range 16 {
		signers.Go(func() {
			for a := range admitted {
				_, err := b.api.WithToken(toks[a.user]).Signup(ctx, act.ID, client.SignupOptions{AdmissionToken: a.token})
				if count(err) == nil {
					signed.Store(a.user, true)
				} else if e, ok := errors.AsType[*client.Error](err); ok && e.Status < 500 {
					// The token is live (signed up on being admitted):
					// any refusal, activity_full above all, broke the
					// promise admission made.
					refused.Add(1)
				}
			}
		})
	}
	var sent sync.Map
	poll := func(ctx context.Context, _ int, i int64) error {
		u := int(i % int64(n))
		t, err := b.api.WithToken(toks[u]).QueueTicket(ctx, act.ID)
		if count(err) != nil {
			return err
		}
		if t.State == "admitted" && t.AdmissionToken != nil {
			if _, dup := sent.LoadOrStore(u, true); !dup {
				admitted <- onSaleAdmission{user: u, token: *t.AdmissionToken}
			}
		}
		return nil
	}
	polls := b.drive(ctx, Load{Name: ScenarioOnSalePoll, Clients: 64, Duration: b.cfg.ScenarioDuration}, poll)
	b.report.Scenarios[ScenarioOnSalePoll] = polls.Result(64)
	// Until every seat is taken (or a minute passes), unmeasured.
	deadline := time.Now().Add(time.Minute)
	for i := polls.Ops; time.Now().Before(deadline) && b.onSaleTaken(ctx, act.ID) < onSaleSeats; i += 64 * 64 {
		b.drive(ctx, Load{Name: ScenarioOnSalePoll + "-rest", Clients: 64, MaxOps: 64 * 64, Duration: 10 * time.Second},
			func(ctx context.Context, c int, j int64) error { return poll(ctx, c, i+j) })
	}
	close(admitted)
	signers.Wait()
	return b.onSaleChecks(ctx, act.ID, fivexx.Load(), refused.Load())
}

// onSaleAdmission is an admitted user, to sign up.
type onSaleAdmission struct {
	user  int
	token string
}

// onSaleTaken returns the seats taken at the authority (-1 on an error).
func (b *bench) onSaleTaken(ctx context.Context, activityID string) int {
	var taken int
	if err := b.db.QueryRow(ctx, `SELECT coalesce(sum(r.seats), 0) FROM registration r JOIN activity a ON a.id = r.activity_id
		WHERE a.public_id = $1 AND r.status IN ('pending', 'awaiting_payment', 'approved')`, activityID).Scan(&taken); err != nil {
		return -1
	}
	return taken
}

// onSaleChecks reads the on-sale's outcome at the authority.
func (b *bench) onSaleChecks(ctx context.Context, activityID string, fivexx, refused int64) error {
	var rho *float64
	var places, tokens, distinct, used, regs int64
	err := b.db.QueryRow(ctx, `
		WITH t AS (SELECT q.* FROM queue_ticket q JOIN activity a ON a.id = q.activity_id WHERE a.public_id = $1)
		SELECT (SELECT corr(r, position) FROM (SELECT row_number() OVER (ORDER BY id) AS r, position FROM t
				WHERE position IS NOT NULL) x),
			(SELECT count(*) FROM t), (SELECT count(token) FROM t), (SELECT count(DISTINCT token) FROM t),
			(SELECT count(*) FROM t WHERE state = 'used'),
			(SELECT count(*) FROM registration r JOIN activity a ON a.id = r.activity_id WHERE a.public_id = $1)`,
		activityID).Scan(&rho, &places, &tokens, &distinct, &used, &regs)
	if err != nil {
		return fatalError{fmt.Errorf("loadtest: read the on-sale's outcome: %w", err)}
	}
	taken := b.onSaleTaken(ctx, activityID)
	b.report.Checks[CheckOnSaleTaken] = int64(taken)
	b.report.Checks[CheckOnSaleTwice] = tokens - distinct
	b.report.Checks[CheckOnSaleUnadmitted] = regs - used
	b.report.Checks[CheckOnSaleRefused] = refused
	b.report.Checks[CheckOnSale5xx] = fivexx
	if rho != nil {
		b.report.Checks[CheckOnSaleRho] = round(math.Abs(*rho), 4)
	}
	fmt.Fprintf(b.log, "%-16s places %d, tokens %d (distinct %d), used %d, registrations %d, taken %d of %d, admitted then refused %d, |rho| %v, 5xx %d\n",
		"onsale", places, tokens, distinct, used, regs, taken, onSaleSeats, refused, b.report.Checks[CheckOnSaleRho], fivexx)
	return nil
}
