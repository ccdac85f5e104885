package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/capacity"
)

// signupBody is the body of every signup.
var signupBody = []byte(`{}`)

// maxSignupRate bounds the tokens pre-signed for a timed signup scenario:
// more than this many signups per second end the scenario early.
const maxSignupRate = 12000

// spreadActivities is the number of activities signup_spread spreads over.
const spreadActivities = 1000

func (b *bench) maxSignups() int {
	return int(b.cfg.ScenarioDuration.Seconds()*maxSignupRate) + 1000
}

// signupHot signs distinct users up for the hot activity (capacity
// 1,000,000, 24,000 occupying among 80,000 rows at the start) from
// clients clients, then removes the rows it added.
func (b *bench) signupHot(ctx context.Context, name string, clients int) error {
	if err := b.driveSignupHot(ctx, name, clients); err != nil {
		return err
	}
	if name == ScenarioSignupHot {
		if err := b.cancelHot(ctx); err != nil {
			fmt.Fprintf(b.log, "%-16s not measured: %v\n", ScenarioCancelHot, err)
		}
	}
	return b.resetHot(ctx)
}

// driveSignupHot is the load of signupHot, reported as scenario name.
func (b *bench) driveSignupHot(ctx context.Context, name string, clients int) error {
	n := b.maxSignups()
	toks, err := b.tokens(name, n)
	if err != nil {
		return err
	}
	path := "/v1/activities/" + b.seed.HotActivity + "/registrations"
	if err := b.warmSeats(ctx, "/v1/activities/"+b.seed.HotActivity+"/seats"); err != nil {
		return err
	}
	out := Drive(ctx, Load{Name: name, Clients: clients, Duration: b.cfg.ScenarioDuration, MaxOps: int64(n)}, b.log,
		func(ctx context.Context, _ int, i int64) error {
			return b.client.Expect(ctx, http.StatusCreated, http.MethodPost, path, toks[i], signupBody, nil)
		})
	b.report.Scenarios[name] = out.Result(clients)
	return nil
}

// cancelHot cancels, as an admin from 64 clients, the registrations that
// signup_hot made on the hot activity: a cancellation storm on one
// activity, batched on its queue like a signup storm.
func (b *bench) cancelHot(ctx context.Context) error {
	const clients = 64
	rows, err := b.db.Query(ctx, `SELECT public_id FROM registration
		WHERE activity_id = $1 AND id > $2 AND status = 'pending' ORDER BY id`, b.seed.HotID, b.seed.MaxRegistrationID)
	if err != nil {
		return fatalError{fmt.Errorf("loadtest: read the registrations to cancel: %w", err)}
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fatalError{fmt.Errorf("loadtest: read the registrations to cancel: %w", err)}
	}
	if len(ids) == 0 {
		return errors.New("signup_hot left nothing to cancel")
	}
	out := Drive(ctx, Load{Name: ScenarioCancelHot, Clients: clients, Duration: b.cfg.ScenarioDuration, MaxOps: int64(len(ids))}, b.log,
		func(ctx context.Context, _ int, i int64) error {
			return b.client.Expect(ctx, http.StatusOK, http.MethodPost, "/v1/registrations/"+ids[i]+"/cancel", b.admin, nil, nil)
		})
	b.report.Scenarios[ScenarioCancelHot] = out.Result(clients)
	return nil
}

// resetHot deletes the registrations scenarios added to the hot activity
// and their events (the seeded rows have none) and sets its last event seq
// back to 0, so every instance counts it again; vacuums so the COUNT is
// index-only again, and drops its display counter (rebuilt from the
// authority on the next signup).
func (b *bench) resetHot(ctx context.Context) error {
	t0 := time.Now()
	tag, err := b.db.Exec(ctx, `DELETE FROM registration WHERE activity_id = $1 AND id > $2`, b.seed.HotID, b.seed.MaxRegistrationID)
	if err == nil {
		_, err = b.db.Exec(ctx, `DELETE FROM registration_event WHERE activity_id = $1`, b.seed.HotID)
	}
	if err == nil {
		_, err = b.db.Exec(ctx, `UPDATE activity_state SET last_seq = 0 WHERE activity_id = $1`, b.seed.HotID)
	}
	if err != nil {
		return fatalError{fmt.Errorf("loadtest: reset the hot activity: %w", err)}
	}
	if _, err := b.db.Exec(ctx, `VACUUM (ANALYZE) registration`); err != nil {
		return fatalError{fmt.Errorf("loadtest: vacuum after reset: %w", err)}
	}
	if b.rdb != nil {
		if err := b.rdb.Del(ctx, capacity.Key(b.seed.HotActivity)).Err(); err != nil {
			return fatalError{fmt.Errorf("loadtest: reset the hot counter: %w", err)}
		}
	}
	fmt.Fprintf(b.log, "reset: removed %d rows from the hot activity and vacuumed (%s)\n", tag.RowsAffected(), time.Since(t0).Round(time.Millisecond))
	return nil
}

// signupSpread signs distinct users up round-robin over 1,000 ordinary
// activities from 64 clients.
func (b *bench) signupSpread(ctx context.Context) error {
	const clients = 64
	k := min(spreadActivities, b.seed.Scale.Activities)
	paths := make([]string, k)
	for i := range paths {
		paths[i] = "/v1/activities/" + ActivityPublicID(i+1) + "/registrations"
	}
	n := b.maxSignups()
	toks, err := b.tokens(ScenarioSignupSpread, n)
	if err != nil {
		return err
	}
	out := Drive(ctx, Load{Name: ScenarioSignupSpread, Clients: clients, Duration: b.cfg.ScenarioDuration, MaxOps: int64(n)}, b.log,
		func(ctx context.Context, _ int, i int64) error {
			return b.client.Expect(ctx, http.StatusCreated, http.MethodPost, paths[i%int64(k)], toks[i], signupBody, nil)
		})
	b.report.Scenarios[ScenarioSignupSpread] = out.Result(clients)
	if k < spreadActivities {
		b.report.Scenarios[ScenarioSignupSpread].Note = fmt.Sprintf("spread over %d activities (the seed has no more)", k)
	}
	return nil
}

// admissionTransactions reads the service's count of admission
// transactions that reached PostgreSQL, whatever their result.
func (b *bench) admissionTransactions(ctx context.Context) (float64, error) {
	text, err := b.client.Text(ctx, "/metrics")
	if err != nil {
		return 0, fmt.Errorf("loadtest: read /metrics: %w", err)
	}
	v, ok := SumMetric(text, "capacityd_admission_transactions_total")
	if !ok {
		return 0, nil // no admission yet: the counter has no series
	}
	return v, nil
}

// flashCrowd sends 20,000 distinct users (Config.FlashCrowdUsers) at a new activity of 500 seats
// from 256 clients, each once: exactly 500 must be admitted, the rest
// refused with 409 activity_full, none answered 5xx.
func (b *bench) flashCrowd(ctx context.Context) error {
	const clients = 256
	id, err := b.client.CreateActivity(ctx, b.admin, "Flash crowd "+b.nonce, FlashCrowdCapacity)
	if err != nil {
		return err
	}
	toks, err := b.tokens(ScenarioFlashCrowd, b.cfg.FlashCrowdUsers)
	if err != nil {
		return err
	}
	tx0, err := b.admissionTransactions(ctx)
	if err != nil {
		return err
	}
	path := "/v1/activities/" + id + "/registrations"
	var admitted, full, fivexx atomic.Int64
	out := Drive(ctx, Load{Name: ScenarioFlashCrowd, Clients: clients, Duration: 2 * time.Minute, MaxOps: int64(b.cfg.FlashCrowdUsers)}, b.log,
		func(ctx context.Context, _ int, i int64) error {
			st, err := b.client.Do(ctx, http.MethodPost, path, toks[i], signupBody, nil)
			switch {
			case err != nil:
				return err
			case st == http.StatusCreated:
				admitted.Add(1)
			case st == http.StatusConflict:
				full.Add(1)
			case st >= 500:
				fivexx.Add(1)
				return fmt.Errorf("status %d", st)
			default:
				return fmt.Errorf("status %d", st)
			}
			return nil
		})
	b.report.Scenarios[ScenarioFlashCrowd] = out.Result(clients)
	tx1, err := b.admissionTransactions(ctx)
	if err != nil {
		return err
	}
	var a Activity
	if err := b.client.Expect(ctx, http.StatusOK, http.MethodGet, "/v1/activities/"+id, "", nil, &a); err != nil {
		return fmt.Errorf("loadtest: read the flash crowd's activity: %w", err)
	}
	b.report.Checks[CheckFlashAdmitted] = admitted.Load()
	b.report.Checks[CheckFlash5xx] = fivexx.Load()
	b.report.Checks[CheckFlashAdmissionTx] = int64(tx1 - tx0)
	b.report.Checks[CheckFlashAuthorityTaken] = int64(a.Taken)
	fmt.Fprintf(b.log, "%-16s admitted %d, full %d, 5xx %d, authority taken %d of %d, admission transactions %d\n",
		ScenarioFlashCrowd, admitted.Load(), full.Load(), fivexx.Load(), a.Taken, FlashCrowdCapacity, int64(tx1-tx0))
	return nil
}

// signupDeadTuples makes exactly 16,000 signups for a new activity (64
// clients) with autovacuum off for the two tables, and records the dead
// tuples they left — the counterpart of the hot-row baseline's.
func (b *bench) signupDeadTuples(ctx context.Context) error {
	const clients = 64
	id, err := b.client.CreateActivity(ctx, b.admin, "Dead tuples "+b.nonce, 1000000)
	if err != nil {
		return err
	}
	toks, err := b.tokens(StepDeadTuple, b.cfg.CountedSignups)
	if err != nil {
		return err
	}
	if _, err := b.db.Exec(ctx, `ALTER TABLE registration SET (autovacuum_enabled = off); ALTER TABLE activity SET (autovacuum_enabled = off)`); err != nil {
		return fatalError{fmt.Errorf("loadtest: pause autovacuum: %w", err)}
	}
	defer b.db.Exec(context.WithoutCancel(ctx), `ALTER TABLE registration RESET (autovacuum_enabled); ALTER TABLE activity RESET (autovacuum_enabled)`)
	if err := sleep(ctx, statsFlushWait); err != nil {
		return err
	}
	act0, err := DeadTuples(ctx, b.db, "activity")
	if err != nil {
		return err
	}
	reg0, err := DeadTuples(ctx, b.db, "registration")
	if err != nil {
		return err
	}
	path := "/v1/activities/" + id + "/registrations"
	out := Drive(ctx, Load{Name: "signups_16k", Clients: clients, Duration: 2 * time.Minute, MaxOps: int64(b.cfg.CountedSignups)}, b.log,
		func(ctx context.Context, _ int, i int64) error {
			return b.client.Expect(ctx, http.StatusCreated, http.MethodPost, path, toks[i], signupBody, nil)
		})
	if err := b.flushServiceStats(ctx); err != nil {
		return err
	}
	act1, err := DeadTuples(ctx, b.db, "activity")
	if err != nil {
		return err
	}
	reg1, err := DeadTuples(ctx, b.db, "registration")
	if err != nil {
		return err
	}
	da, dr := max(act1-act0, 0), max(reg1-reg0, 0)
	b.report.Checks[CheckSignupDeadActivity] = da
	b.report.Checks[CheckSignupDeadRegs] = dr
	b.report.Checks[CheckSignupDeadTuples] = da + dr
	fmt.Fprintf(b.log, "%-16s %d signups (%d failed): dead tuples in activity %d, in registration %d\n",
		"signups_16k", out.Ops, out.Errors, da, dr)
	return nil
}

// flushServiceStats makes sure the statistics of capacityd's backends are
// in pg_stat_*: a started capacityd is restarted (its backends flush
// them on exit), a running one is given the 10 s idle backends may take.
func (b *bench) flushServiceStats(ctx context.Context) error {
	if b.server == nil {
		return sleep(ctx, b.cfg.StatsIdleWait)
	}
	b.stopService()
	if err := sleep(ctx, statsFlushWait); err != nil {
		return err
	}
	return b.startService(ctx, "", "NOTE_COMBINING=on")
}
