package loadtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/test/launch"
)

// Config is one benchmark run.
type Config struct {
	// DatabaseURL is the seeded bench database.
	DatabaseURL string
	// RedisURL is the bench display tier (a logical database of its own:
	// it is flushed at the start when the run starts capacityd itself).
	RedisURL string
	// ServiceURL, when set, is a running capacityd to measure instead of
	// starting one; Secret must then be its CAPACITY_JWT_SECRET.
	ServiceURL string
	// NaiveURL, with ServiceURL, is a capacityd running with
	// NOTE_COMBINING=off for views_naive; empty: views_naive is skipped.
	NaiveURL string
	Secret   string
	// Binary is a built capacityd; empty: built into BuildDir.
	Binary   string
	BuildDir string
	// ScenarioDuration bounds each HTTP scenario, BaselineDuration each
	// pgx baseline.
	ScenarioDuration time.Duration
	BaselineDuration time.Duration
	// Only, when not empty, runs only the named steps: "baselines",
	// "count" and scenario names.
	Only []string
	// Skip names steps not to run (QuickSkips in a quick run).
	Skip []string
	Log  io.Writer

	// Sizes size the scenarios; zero sizes take the full run's.
	Sizes
	// StatsIdleWait is how long idle PostgreSQL backends may hold their
	// statistics back (default 11 s, PostgreSQL's 10 s and a margin);
	// the transaction counts wait for it.
	StatsIdleWait time.Duration
}

// withDefaults fills the zero sizes.
func (c Config) withDefaults() Config {
	if c.Log == nil {
		c.Log = io.Discard
	}
	c.Sizes = c.Sizes.withDefaults()
	c.StatsIdleWait = cmp.Or(c.StatsIdleWait, idleStatsFlushWait)
	c.ScenarioDuration = cmp.Or(c.ScenarioDuration, 10*time.Second)
	c.BaselineDuration = cmp.Or(c.BaselineDuration, 5*time.Second)
	c.BuildDir = cmp.Or(c.BuildDir, os.TempDir())
	return c
}

// Step names that are not scenarios.
const (
	StepBaselines = "baselines"
	StepCount     = "count"
	StepDeadTuple = "dead_tuples"
)

func (c Config) wants(step string) bool {
	return !slices.Contains(c.Skip, step) && (len(c.Only) == 0 || slices.Contains(c.Only, step))
}

// QuickSkips are the steps a quick run leaves out unless asked for by
// name: door_rush (two rushes of 11,000 scans and their setup, about a
// minute on two cores) and dashboards (two rounds of 200 dashboards and
// their idle count, about 45 s): more than a quick run can spare.
var QuickSkips = []string{ScenarioDoorRush, ScenarioDashboards}

// bench is the state of one run.
type bench struct {
	cfg    Config
	report *Report
	seed   SeedInfo
	log    io.Writer
	auth   *httpapi.Authenticator
	admin  string
	// limitedBlock is the block signup_hot_limited made on the hot
	// activity.
	limitedBlock client.Block
	nonce        string
	rdb          *redis.Client
	db           *pgx.Conn
	mon          *Monitor
	server       *launch.Process
	api          *API
	// sseActivity is the stream scenario's activity, made ahead of time.
	sseActivity string
}

// Run measures everything Config asks for on a seeded database and
// returns the report. Errors of the infrastructure (no seed, no server, a
// Seq Scan in the COUNT plan) are returned; unmet targets are not errors.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := ValidateDoorDevices(cfg.DoorDevices); err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, log: cfg.Log, nonce: randomHex(4)}
	b.report = NewReport(DescribeMachine(ctx, cfg.DatabaseURL, cfg.RedisURL))
	fmt.Fprintf(b.log, "machine: %s\n", b.report.Machine)
	defer b.close()
	if err := b.open(ctx); err != nil {
		return b.report, err
	}
	var countErr error
	if cfg.wants(StepBaselines) {
		if err := RunBaselines(ctx, cfg.DatabaseURL, cfg.BaselineDuration, cfg.CountedSignups, b.report, b.log); err != nil {
			return b.report, err
		}
		if err := MeasureLoopbackPost(ctx, cfg.BaselineDuration, b.report, b.log); err != nil {
			return b.report, err
		}
	}
	if cfg.wants(StepCount) {
		if countErr = CheckCount(ctx, cfg.DatabaseURL, b.seed, b.report, b.log); countErr != nil && !errors.Is(countErr, ErrSeqScan) {
			return b.report, countErr
		}
	}
	if err := b.services(ctx); err != nil {
		return b.report, err
	}
	b.report.ComputeRatios()
	return b.report, countErr
}

func (b *bench) open(ctx context.Context) error {
	var err error
	if b.db, err = pgx.Connect(ctx, b.cfg.DatabaseURL); err != nil {
		return fmt.Errorf("loadtest: connect to the bench database: %w", err)
	}
	if b.seed, err = ReadSeed(ctx, b.db); err != nil {
		return err
	}
	if b.mon, err = OpenMonitor(ctx, b.cfg.DatabaseURL); err != nil {
		return err
	}
	if b.cfg.RedisURL != "" {
		opt, err := redis.ParseURL(b.cfg.RedisURL)
		if err != nil {
			return fmt.Errorf("loadtest: bench Redis URL: %w", err)
		}
		b.rdb = redis.NewClient(opt)
	}
	if b.cfg.Secret == "" {
		b.cfg.Secret = "loadtest-" + randomHex(24)
	}
	if b.auth, err = httpapi.NewAuthenticator([]byte(b.cfg.Secret)); err != nil {
		return fmt.Errorf("loadtest: secret: %w", err)
	}
	b.admin, err = b.auth.Sign("loadtest-admin", true, 2*time.Hour)
	return err
}

func (b *bench) close() {
	ctx := context.Background()
	if b.server != nil {
		b.server.Stop(stopGrace)
	}
	if b.api != nil {
		b.api.Close()
	}
	if b.mon != nil {
		b.mon.Close(ctx)
	}
	if b.db != nil {
		_ = b.db.Close(ctx)
	}
	if b.rdb != nil {
		_ = b.rdb.Close()
	}
}

// user returns the i-th distinct user of a scenario of this run.
func (b *bench) user(scenario string, i int) string {
	return fmt.Sprintf("lt-%s-%s-%d", b.nonce, scenario, i)
}

// tokens pre-signs n tokens of distinct users for a scenario.
func (b *bench) tokens(scenario string, n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		t, err := b.auth.Sign(b.user(scenario, i), false, 2*time.Hour)
		if err != nil {
			return nil, fmt.Errorf("loadtest: sign tokens: %w", err)
		}
		out[i] = t
	}
	return out, nil
}

// startService starts capacityd (with extra env) or connects to the
// configured one.
func (b *bench) startService(ctx context.Context, url string, env ...string) error {
	if url == "" {
		if b.cfg.Binary == "" {
			bin, err := launch.Build(ctx, launch.BuildOptions{Dir: b.cfg.BuildDir})
			if err != nil {
				return err
			}
			b.cfg.Binary = bin
		}
		s, err := StartServer(ctx, ServerConfig{Binary: b.cfg.Binary, DatabaseURL: b.cfg.DatabaseURL,
			RedisURL: b.cfg.RedisURL, Secret: b.cfg.Secret, Env: env})
		if err != nil {
			return err
		}
		b.server, url = s, s.URL
		fmt.Fprintf(b.log, "capacityd pid %d on %s %v\n", s.PID(), url, env)
	}
	api, err := NewAPI(url)
	if err != nil {
		return err
	}
	if b.api != nil {
		b.api.Close()
	}
	b.api = api
	return nil
}

func (b *bench) stopService() {
	if b.server != nil {
		b.server.Stop(stopGrace)
		b.server = nil
	}
}

// services runs the HTTP scenarios in an order that keeps them apart:
// reads first (the cache warm, no writes) and the stream (whose
// PostgreSQL transactions are counted while nothing else writes), then
// the signups (the hot activity reset after each; production on a
// capacityd restarted with its settings, then the usual one again),
// views, the 16,000 signups whose dead tuples are counted, and last
// views_naive on a capacityd restarted with combining off.
func (b *bench) services(ctx context.Context) error {
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{ScenarioTrivial + "+" + ScenarioSeatsRead, b.reads},
		{ScenarioSSEFanout, b.sseFanout},
		{ScenarioSignupHot, func(ctx context.Context) error { return b.signupHot(ctx, ScenarioSignupHot, 64) }},
		{ScenarioActivityRead, b.activityRead},
		{ScenarioDashboards, b.dashboards},
		{ScenarioSignupHotWebhooks, b.signupHotWebhooks},
		{ScenarioProduction, b.production},
		{ScenarioSignupHotLimited, b.signupHotLimited},
		{ScenarioSignupHot256, func(ctx context.Context) error { return b.signupHot(ctx, ScenarioSignupHot256, 256) }},
		{ScenarioSignupSpread, b.signupSpread},
		{ScenarioFlashCrowd, b.flashCrowd},
		{ScenarioWaitCrowd, b.flashCrowdWaitlist},
		{ScenarioPromoteStorm, b.promoteStorm},
		{ScenarioCourseRush, b.courseRush},
		{ScenarioGroupRush, b.groupRush},
		{ScenarioPoolRush, b.poolRush},
		{ScenarioDoorRush, b.doorRush},
		{ScenarioReleaseStorm, b.releaseStorm},
		{ScenarioOnSaleJoin + "+" + ScenarioOnSalePoll, b.onSale},
		{ScenarioViewsHot, func(ctx context.Context) error { return b.views(ctx, ScenarioViewsHot) }},
		{StepDeadTuple, b.signupDeadTuples},
	}
	wanted := false
	for _, s := range steps {
		wanted = wanted || b.wantsStep(s.name)
	}
	if !wanted && !b.cfg.wants(ScenarioViewsNaive) {
		return nil
	}
	external := b.cfg.ServiceURL != ""
	if !external && b.rdb != nil {
		if err := b.rdb.FlushDB(ctx).Err(); err != nil {
			return fmt.Errorf("loadtest: flush the bench Redis database: %w", err)
		}
	}
	if err := b.startService(ctx, b.cfg.ServiceURL, "NOTE_COMBINING=on"); err != nil {
		return err
	}
	for _, s := range steps {
		if !b.wantsStep(s.name) {
			continue
		}
		if err := s.run(ctx); err != nil {
			if ctx.Err() == nil && !isFatal(err) {
				fmt.Fprintf(b.log, "%-16s not measured: %v\n", s.name, err)
				continue
			}
			return err
		}
		if err := b.checkAlive(); err != nil {
			return err
		}
	}
	if !b.cfg.wants(ScenarioViewsNaive) {
		return nil
	}
	if external {
		if b.cfg.NaiveURL == "" {
			b.report.Scenarios[ScenarioViewsNaive] = &ScenarioResult{Note: "skipped: no -naive-url for a capacityd with NOTE_COMBINING=off"}
			return nil
		}
		if err := b.startService(ctx, b.cfg.NaiveURL); err != nil {
			return err
		}
	} else {
		b.stopService()
		if err := b.startService(ctx, "", "NOTE_COMBINING=off"); err != nil {
			return err
		}
	}
	if err := b.views(ctx, ScenarioViewsNaive); err != nil {
		fmt.Fprintf(b.log, "%-16s not measured: %v\n", ScenarioViewsNaive, err)
	}
	return b.checkAlive()
}

// checkAlive fails the run when the capacityd it started has exited: the
// scenarios after that would measure nothing.
func (b *bench) checkAlive() error {
	if b.server != nil && b.server.Exited() {
		return fmt.Errorf("loadtest: capacityd exited during the run:\n%s", b.server.Output())
	}
	return nil
}

func (b *bench) wantsStep(name string) bool {
	for part := range strings.SplitSeq(name, "+") {
		if b.cfg.wants(part) {
			return true
		}
	}
	return false
}

// fatalError marks an error that ends the run (the infrastructure broke),
// as opposed to one scenario that could not be measured.
type fatalError struct{ err error }

func (f fatalError) Error() string { return f.err.Error() }
func (f fatalError) Unwrap() error { return f.err }

func isFatal(err error) bool {
	var f fatalError
	return errors.As(err, &f)
}

func randomHex(n int) string {
	p := make([]byte, n)
	_, _ = rand.Read(p)
	return hex.EncodeToString(p)
}

// drive runs a load of the bench (see Drive), measuring the WAL the bench
// server writes meanwhile and the processor time of the bench's own
// processes.
func (b *bench) drive(ctx context.Context, l Load, op Op) Outcome {
	if b.mon != nil {
		l.WAL = b.mon.WALPosition
	}
	l.Processes = b.processes
	return Drive(ctx, l, b.log, op)
}
