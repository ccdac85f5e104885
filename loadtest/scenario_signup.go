package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/physiciansnet/capacityd/capacity"
	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/store"
	"github.com/physiciansnet/capacityd/stream"
)

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
	if err := b.driveSignupHot(ctx, name, clients, nil); err != nil {
		return err
	}
	if name == ScenarioSignupHot {
		if err := b.cancelHot(ctx); err != nil {
			fmt.Fprintf(b.log, "%-16s not measured: %v\n", ScenarioCancelHot, err)
		}
	}
	return b.resetHot(ctx)
}

// driveSignupHot is the load of signupHot, reported as scenario name;
// settle, if not nil, is the load's Settle.
func (b *bench) driveSignupHot(ctx context.Context, name string, clients int, settle func(context.Context) error) error {
	n := b.maxSignups()
	toks, err := b.tokens(name, n)
	if err != nil {
		return err
	}
	if err := b.warmSeats(ctx, b.seed.HotActivity); err != nil {
		return err
	}
	out := b.drive(ctx, Load{Name: name, Clients: clients, Duration: b.cfg.ScenarioDuration, MaxOps: int64(n), Settle: settle},
		func(ctx context.Context, _ int, i int64) error {
			return b.signupAdmitted(ctx, toks[i], b.seed.HotActivity)
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
	out := b.cancelAll(ctx, ScenarioCancelHot, clients, b.cfg.ScenarioDuration, ids)
	b.report.Scenarios[ScenarioCancelHot] = out.Result(clients)
	return nil
}

// cancelAll cancels the registrations ids as an admin from clients
// clients, each once, for at most d.
func (b *bench) cancelAll(ctx context.Context, name string, clients int, d time.Duration, ids []string) Outcome {
	admin := b.api.WithToken(b.admin)
	return b.drive(ctx, Load{Name: name, Clients: clients, Duration: d, MaxOps: int64(len(ids))},
		func(ctx context.Context, _ int, i int64) error {
			_, err := admin.CancelRegistration(ctx, ids[i])
			return err
		})
}

// signupAdmitted signs the token's user up for an activity and fails
// unless a seat was given (201).
func (b *bench) signupAdmitted(ctx context.Context, token, activity string) error {
	res, err := b.api.WithToken(token).Signup(ctx, activity, client.SignupOptions{})
	if err == nil && res.Waitlisted {
		return errors.New("signup: waitlisted (202), want a seat (201)")
	}
	return err
}

// resetHot deletes the registrations scenarios added to the hot activity
// and their events (the seeded rows have none) and sets its last event seq
// back to 0, so every instance counts it again; vacuums so the COUNT is
// index-only again, drops its display counter (rebuilt from the
// authority on the next signup) and announces the change, so that the
// instances' seat memory reads it again.
func (b *bench) resetHot(ctx context.Context) error {
	t0 := time.Now()
	removed, err := b.deleteHotRows(ctx)
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
		// The seq went back behind the service, whose seat memory applies
		// an activity's states only forward by seq: an announcement
		// without state (what the service publishes for a change whose
		// seats it does not know) makes every instance read them afresh.
		if err := b.rdb.Publish(ctx, stream.Channel, capacity.SeatChange{ActivityID: b.seed.HotActivity}.Encode()).Err(); err != nil {
			return fatalError{fmt.Errorf("loadtest: announce the hot activity's reset: %w", err)}
		}
	}
	fmt.Fprintf(b.log, "reset: removed %d rows from the hot activity and vacuumed (%s)\n", removed, time.Since(t0).Round(time.Millisecond))
	return nil
}

// deadlockDetected is PostgreSQL's SQLSTATE for a transaction it aborted
// to break a deadlock.
const deadlockDetected = "40P01"

// deleteHotRows deletes, in one transaction, what resetHot resets, and
// returns the registrations it deleted. Requests that the scenario's end
// abandoned may still be changing the activity in the service: the
// transaction takes the activity's change lock first (store.LockActivity),
// so those changes are made wholly before it or after it, and it is tried
// again should PostgreSQL still break a deadlock with one.
func (b *bench) deleteHotRows(ctx context.Context) (int64, error) {
	var removed int64
	var err error
	for try := 0; try < 5; try++ {
		err = pgx.BeginFunc(ctx, b.db, func(tx pgx.Tx) error {
			if err := store.LockActivity(ctx, tx, b.seed.HotID); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `DELETE FROM registration WHERE activity_id = $1 AND id > $2`, b.seed.HotID, b.seed.MaxRegistrationID)
			if err != nil {
				return err
			}
			removed = tag.RowsAffected()
			if _, err := tx.Exec(ctx, `DELETE FROM registration_event WHERE activity_id = $1`, b.seed.HotID); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE activity_state SET last_seq = 0 WHERE activity_id = $1`, b.seed.HotID); err != nil {
				return err
			}
			// The history starts again: so do the webhooks' cursors of it.
			_, err = tx.Exec(ctx, `UPDATE webhook_cursor SET seq = 0, claimed_to = NULL, leased_until = NULL WHERE activity_id = $1`, b.seed.HotID)
			return err
		})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != deadlockDetected {
			return removed, err
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return removed, err
}

// signupSpread signs distinct users up round-robin over 1,000 ordinary
// activities from 64 clients, once their seat counters are warm, and
// records how many were when the timed part began.
func (b *bench) signupSpread(ctx context.Context) error {
	const clients = 64
	k := min(spreadActivities, b.seed.Scale.Activities)
	ids := make([]string, k)
	for i := range ids {
		ids[i] = ActivityPublicID(i + 1)
	}
	n := b.maxSignups()
	toks, err := b.tokens(ScenarioSignupSpread, n)
	if err != nil {
		return err
	}
	// As signup_hot's activity, the activities' display counters are warm
	// when the timed part starts. A signup that finds no counter skips the
	// gate and its commit builds the counter: the first signup of each
	// activity would otherwise take that path inside the timed part.
	t0 := time.Now()
	if err := b.warmAllSeats(ctx, ids, clients); err != nil {
		return err
	}
	if b.rdb != nil && b.cfg.ServiceURL == "" {
		warm, err := b.warmCounters(ctx, ids)
		if err != nil {
			return err
		}
		b.report.Checks[CheckSpreadCountersWarm] = warm
		fmt.Fprintf(b.log, "%-16s seat counters of %d of %d activities warm (%s)\n", ScenarioSignupSpread, warm, k, time.Since(t0).Round(time.Millisecond))
	}
	out := b.drive(ctx, Load{Name: ScenarioSignupSpread, Clients: clients, Duration: b.cfg.ScenarioDuration, MaxOps: int64(n)},
		func(ctx context.Context, _ int, i int64) error {
			return b.signupAdmitted(ctx, toks[i], ids[i%int64(k)])
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
	text, err := b.api.Text(ctx, "/metrics")
	if err != nil {
		return 0, fmt.Errorf("loadtest: read /metrics: %w", err)
	}
	v, ok := SumMetric(text, "capacityd_admission_transactions_total")
	if !ok {
		return 0, nil // no admission yet: the counter has no series
	}
	return v, nil
}

// flashCrowd sends Sizes.FlashCrowdUsers distinct users (20,000) at a
// new activity of 500 seats from 256 clients, each once: exactly 500 must
// be admitted, the rest refused with 409 activity_full, none answered
// 5xx.
func (b *bench) flashCrowd(ctx context.Context) error {
	c, err := b.crowd(ctx, ScenarioFlashCrowd, b.cfg.FlashCrowdUsers, FullSizes.FlashCrowdUsers, false)
	if err != nil {
		return err
	}
	b.report.Checks[CheckFlashAdmitted] = c.answers.count(http.StatusCreated)
	b.report.Checks[CheckFlash5xx] = c.answers.fivexx()
	b.report.Checks[CheckFlashAdmissionTx] = c.tx
	b.report.Checks[CheckFlashAuthorityTaken] = int64(c.activity.Taken)
	fmt.Fprintf(b.log, "%-16s admitted %d, full %d, 5xx %d, authority taken %d of %d, admission transactions %d\n",
		ScenarioFlashCrowd, c.answers.count(http.StatusCreated), c.answers.count(http.StatusConflict), c.answers.fivexx(),
		c.activity.Taken, FlashCrowdCapacity, c.tx)
	return nil
}

// crowdClients is the concurrency of the crowds.
const crowdClients = 256

// crowdResult is what a crowd got from its activity.
type crowdResult struct {
	answers statusTally
	// positions are the waitlist_positions answered with 202, by user (0:
	// no 202).
	positions []int32
	// tx is the admission transactions that reached PostgreSQL meanwhile.
	tx int64
	// activity is the activity afterwards, read from the authority.
	activity client.Activity
}

// crowd creates an activity of FlashCrowdCapacity seats, with a waiting
// list when waitlist is set, and sends users distinct users (full in make
// bench) at it from 256 clients, each once, recording the scenario name.
// An answer other than 201, 202 (with the list) or 409 (without it) fails
// its operation.
func (b *bench) crowd(ctx context.Context, name string, users, full int, waitlist bool) (*crowdResult, error) {
	a, err := b.api.WithToken(b.admin).CreateActivity(ctx, client.NewActivity{Title: name + " " + b.nonce, Capacity: FlashCrowdCapacity, Waitlist: waitlist})
	if err != nil {
		return nil, fmt.Errorf("loadtest: create the crowd's activity: %w", err)
	}
	toks, err := b.tokens(name, users)
	if err != nil {
		return nil, err
	}
	tx0, err := b.admissionTransactions(ctx)
	if err != nil {
		return nil, err
	}
	refused := map[bool]int{false: http.StatusConflict, true: http.StatusAccepted}[waitlist]
	c := &crowdResult{positions: make([]int32, users)}
	out := b.drive(ctx, Load{Name: name, Clients: crowdClients, Duration: 2 * time.Minute, MaxOps: int64(users)},
		func(ctx context.Context, _ int, i int64) error {
			res, err := b.api.WithToken(toks[i]).Signup(ctx, a.ID, client.SignupOptions{})
			st, err := signupAnswer(res, err)
			if err != nil {
				return err
			}
			c.answers.add(st)
			if p := res.Registration.WaitlistPosition; res.Waitlisted && p != nil {
				c.positions[i] = int32(*p)
			}
			if st != http.StatusCreated && st != refused {
				return fmt.Errorf("status %d", st)
			}
			return nil
		})
	res := out.Result(crowdClients)
	res.Note = sizeNote("%d users", [2]int{users, full})
	b.report.Scenarios[name] = res
	tx1, err := b.admissionTransactions(ctx)
	if err != nil {
		return nil, err
	}
	c.tx = int64(tx1 - tx0)
	if c.activity, err = b.api.WithToken(b.admin).GetActivity(ctx, a.ID); err != nil {
		return nil, fmt.Errorf("loadtest: read the crowd's activity: %w", err)
	}
	return c, nil
}

// signupDeadTuples makes exactly 16,000 signups for a new activity (64
// clients) with autovacuum off for the two tables, and records the dead
// tuples they left — the counterpart of the hot-row baseline's.
func (b *bench) signupDeadTuples(ctx context.Context) error {
	const clients = 64
	a, err := b.api.WithToken(b.admin).CreateActivity(ctx, client.NewActivity{Title: "Dead tuples " + b.nonce, Capacity: 1000000})
	if err != nil {
		return fmt.Errorf("loadtest: create activity: %w", err)
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
	out := b.drive(ctx, Load{Name: "signups_16k", Clients: clients, Duration: 2 * time.Minute, MaxOps: int64(b.cfg.CountedSignups)},
		func(ctx context.Context, _ int, i int64) error {
			return b.signupAdmitted(ctx, toks[i], a.ID)
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
