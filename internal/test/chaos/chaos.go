// Package chaos runs capacityd as real processes under a concurrent
// client workload (parties of 1 to 4 seats on half the activities, strict
// or fill waiting lists, seat reductions, most activities in one or two
// of three overlapping pools, some with blocks of seats for a code or for
// a role of the users' tokens, some
// in series that limit each user's registrations, some with a confirm_by
// or a release of their no-shows, confirmed and scanned at their doors
// across the moment) while it injects
// faults — instances killed with SIGKILL and restarted, Redis killed,
// flushed and restarted, PostgreSQL restarted, and latency, bandwidth
// limits, resets and half-open connections on the instances' links
// (toxiproxy, in process) — while buyers follow two on-sales' admission
// queues, records what the clients observe (internal/test/history) and checks
// it (internal/test/histcheck): a linearizable authority (blocks' reserved
// seats included), pools never over their capacity and lines left with
// nothing that fits, no user over a series' limit, admission in position
// order with single-use tokens, the service's releases only of the
// seats their rule releases, at its moment, with the line promoted in
// the same transaction (read from the event logs: histcheck.AddReleases,
// histcheck.CheckReleases), a display that errs only by changes in
// flight and converges within its TTL once quiet, and exact note
// counters.
package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/test/apicheck"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/histcheck"
	"github.com/physiciansnet/capacityd/internal/test/history"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// Config configures a run.
type Config struct {
	// Duration of the workload; faults are injected meanwhile.
	Duration time.Duration
	// Faults are the classes injected in turn; none: a run without faults.
	Faults []Class
	// Hold is how long each fault lasts, and Gap the quiet time before
	// each (drawn up to twice the value). Defaults 2s and 1.5s.
	Hold, Gap time.Duration
	// Nodes is the number of instances (default 2) and Workers the
	// number of concurrent clients (default 10).
	Nodes, Workers int
	// LostAnswers lets resets and half-open links lose what PostgreSQL or
	// Redis answers, after a write reached it; otherwise they break the
	// request direction only, where nothing reaches the server.
	LostAnswers bool
	// Tags are the build tags of the binary; none: the release build.
	Tags []string
	// SeatTTL is the display counters' lifetime (default 5s).
	SeatTTL time.Duration
	// OpsPerObject is how many operations an activity or note serves
	// before a fresh one takes its place (default 60).
	OpsPerObject int
	// Seed makes the workload's choices repeatable; 0: random.
	Seed uint64
	// HA makes PostgreSQL a pg_auto_failover formation (a monitor, a
	// primary and a synchronous standby) instead of a single server; its
	// fault classes are HAClasses'. Async makes its standby asynchronous.
	HA, Async bool
	// Proxies puts HAProxy in front of the instances (clients reach them
	// directly and through it) and, on a single server, PgBouncer in front
	// of PostgreSQL (Topology.Proxies), for the fault classes
	// ProxyClasses.
	Proxies bool
}

// clientTimeout bounds each request: longer than the service's request
// deadline and its change transactions' 10 s flush timeout.
const clientTimeout = 12 * time.Second

// Run starts a cluster of cfg.Nodes instances, runs the workload for
// cfg.Duration while injecting faults, lets the cluster settle, and checks
// the history.
func Run(t testing.TB, cfg Config) Result {
	t.Helper()
	cfg = withDefaults(cfg)
	ttl := cfg.SeatTTL
	top := Topology{HA: cfg.HA, Formation: testenv.AutoFailoverOptions{Async: cfg.Async}, Proxies: cfg.Proxies}
	c := StartCluster(t, cfg.Nodes, Binary(t, cfg.Tags...), top,
		"RATE_LIMIT_SIGNUPS=0", "RATE_LIMIT_BLOCK_CODES=0", "RATE_LIMIT_PUBLIC_WRITES=0", "RATE_LIMIT_PUBLIC_READS=0", "NOTE_WATER_WINDOW=0s", "SEAT_CACHE_TTL="+ttl.String(),
		"RECONCILE_INTERVAL=1s", "REQUEST_TIMEOUT=5s", "DB_MAX_CONNS=8", "MIGRATE_ON_START=false", "LOG_LEVEL=warn")
	rec := history.New()
	rec.Set("seat_cache_ttl", ttl.String())
	rec.Set("duration", cfg.Duration.String())
	rec.Set("nodes", fmt.Sprint(cfg.Nodes))
	rec.Set("lost_answers", fmt.Sprint(cfg.LostAnswers))

	var vmu sync.Mutex
	var violations []string
	checker, err := apicheck.Default()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: clientTimeout, Transport: &apicheck.Transport{
		Base:    &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
		Checker: checker,
		Report: func(err error) {
			vmu.Lock()
			defer vmu.Unlock()
			violations = append(violations, err.Error())
		},
	}}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	rec.Set("seed", fmt.Sprint(seed))
	auth, err := httpapi.NewAuthenticator([]byte(apptest.Secret))
	if err != nil {
		t.Fatal(err)
	}
	sign := func(sub string, admin bool) string {
		tok, err := auth.Sign(sub, admin, cfg.Duration+time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	hard, cancel := context.WithTimeout(context.Background(), cfg.Duration+45*time.Second)
	defer cancel()
	w := &workload{rec: rec, nodes: c.Entries(), hc: hc, admin: sign("admin", true), run: fmt.Sprintf("%x", seed&0xffffff),
		opsPer: int64(cfg.OpsPerObject), ctx: hard}
	w.signUsers(t, cfg, sign)
	rng := rand.New(rand.NewPCG(seed, 0))
	w.createObjects(t, rng, cfg, sign)

	var wg sync.WaitGroup
	for i := range cfg.Workers {
		wg.Go(func() { w.worker(i, seed) })
	}
	w.startBuyers(&wg, cfg.Workers, seed)
	frng := rand.New(rand.NewPCG(seed, 1))
	in := &injector{t: t, c: c, rec: rec, rng: frng, counts: map[Class]int{}, lostAnswers: cfg.LostAnswers,
		hold: func() time.Duration { return jitter(frng, cfg.Hold) }}
	soft, stopFaults := context.WithTimeout(context.Background(), cfg.Duration)
	defer stopFaults()
	if len(cfg.Faults) > 0 {
		in.run(soft, cfg.Faults, func() time.Duration { return jitter(frng, cfg.Gap) })
	}
	<-soft.Done()
	// A failover late in the run would otherwise end it before any
	// signup could show that writes came back.
	awaitRecoveries(rec, recoveryWait)
	w.stop.Store(true)
	c.Heal()
	wg.Wait()
	w.awaitReleases()
	w.racers.Wait()

	res := Result{Faults: in.counts, Cluster: c}
	res.Converged = settle(t, w, ttl)
	w.recordAuthority(t, c)
	res.Doors = w.checkDoors(t)
	res.History, res.Releases = w.historyWithReleases(t)
	res.Recoveries = Recoveries(res.History)
	checkStart := time.Now()
	res.Report = histcheck.Check(res.History, histcheck.Options{
		// A request may run for the flush timeout after its client gave
		// up, then its hold lives at most a TTL.
		OrphanWindow: clientTimeout + 10*time.Second + ttl,
		FaultSlack:   3 * time.Second,
		Timeout:      3 * time.Minute,
	})
	res.CheckTook = time.Since(checkStart)
	vmu.Lock()
	res.Violations = violations
	vmu.Unlock()
	return res
}

// signUsers signs each user's tokens: a plain one, one whose roles hold
// blockRole and one of another role only.
func (w *workload) signUsers(t testing.TB, cfg Config, sign func(sub string, admin bool) string) {
	signRoles := func(sub string, roles []string) string {
		now := time.Now()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, httpapi.Claims{Roles: roles, RegisteredClaims: jwt.RegisteredClaims{
			Subject: sub, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(cfg.Duration + time.Hour))}}).
			SignedString([]byte(apptest.Secret))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for u := range users {
		sub := fmt.Sprintf("user-%d", u)
		w.tokens[u] = sign(sub, false)
		w.memberTokens[u], w.otherTokens[u] = signRoles(sub, memberRoles), signRoles(sub, otherRoles)
	}
}

// createObjects creates, before any fault, the pools, the first
// activities, the on-sales and the first notes.
func (w *workload) createObjects(t testing.TB, rng *rand.Rand, cfg Config, sign func(sub string, admin bool) string) {
	for range poolSlots {
		p, ok := w.createPool(rng, 0)
		if !ok {
			t.Fatalf("chaos: could not create a pool before any fault")
		}
		w.pools = append(w.pools, p)
	}
	for range max(2, cfg.Workers/2) {
		a, ok := w.createActivity(rng, 0)
		if !ok {
			t.Fatalf("chaos: could not create an activity before any fault")
		}
		w.slots = append(w.slots, a)
	}
	if !w.openSales(rng, sign) {
		t.Fatalf("chaos: could not create the on-sales before any fault")
	}
	for range 2 {
		w.nextNote++
		w.notes = append(w.notes, &note{id: fmt.Sprintf("chaos-%s-%d", w.run, w.nextNote)})
	}
}

// recoveryWait is how long a run goes on past its duration for a signup
// to be taken after its last failover.
const recoveryWait = 40 * time.Second

// awaitRecoveries returns once a signup was taken after every
// postgres_failover recorded so far, or after limit.
func awaitRecoveries(rec *history.Recorder, limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		h := rec.History()
		failovers := 0
		for _, f := range h.Faults {
			if f.Class == string(PostgresFailover) {
				failovers++
			}
		}
		if len(Recoveries(h)) >= failovers {
			return
		}
	}
}

// jitter returns a duration between d/2 and 3d/2.
func jitter(r *rand.Rand, d time.Duration) time.Duration {
	return d/2 + time.Duration(r.Int64N(int64(d)+1))
}

func withDefaults(cfg Config) Config {
	if cfg.Nodes == 0 {
		cfg.Nodes = 2
	}
	if cfg.Workers == 0 {
		cfg.Workers = 10
	}
	if cfg.Hold == 0 {
		cfg.Hold = 2 * time.Second
	}
	if cfg.Gap == 0 {
		cfg.Gap = 1500 * time.Millisecond
	}
	if cfg.SeatTTL == 0 {
		cfg.SeatTTL = 5 * time.Second
	}
	if cfg.OpsPerObject == 0 {
		cfg.OpsPerObject = 60
	}
	return cfg
}

// settle waits, with the faults healed and the workload stopped, until
// every node is ready; then it reads every activity's authority and its
// display on every node until they agree (within twice the TTL; the
// authority read again each time, as a late release may change it),
// every pool's authority, and every note's stats, all recorded in the
// history. It returns what did not converge.
func settle(t testing.TB, w *workload, ttl time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w.ctx = ctx
	for _, n := range w.nodes {
		for {
			r, err := client.New(n.URL, "", w.hc).Ready(ctx)
			if err == nil && r.Redis == "ok" {
				break
			}
			if !sleep(ctx, 100*time.Millisecond) {
				return fmt.Errorf("%s not ready with Redis within 60s: %v", n.Name, err)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	w.mu.Lock()
	acts, notes, pools := append([]*activity(nil), w.activities...), append([]*note(nil), w.notes...), append([]*pool(nil), w.allPools...)
	w.mu.Unlock()
	deadline := time.Now().Add(2*ttl + 5*time.Second)
	var stuck []string
	for _, a := range acts {
		auth, ok := w.readActivity(rng, 0, a.id)
		for !ok && sleep(ctx, 100*time.Millisecond) {
			auth, ok = w.readActivity(rng, 0, a.id)
		}
		converged := false
		for !converged {
			converged = true
			for range w.nodes {
				s, ok := w.readSeats(rng, 0, a.id)
				converged = converged && ok && s.Taken == auth.Taken && s.Waiting == auth.Waiting && s.Capacity == auth.Capacity
			}
			if !converged && (time.Now().After(deadline) || !sleep(ctx, 250*time.Millisecond)) {
				stuck = append(stuck, fmt.Sprintf("%s (authority taken %d waiting %d)", a.id, auth.Taken, auth.Waiting))
				break
			}
			if !converged {
				if again, ok := w.readActivity(rng, 0, a.id); ok {
					auth = again
				}
			}
		}
	}
	for _, p := range pools {
		w.readPool(rng, 0, p.id)
	}
	for _, n := range notes {
		w.noteRead(rng, 0, history.NoteStats, n.id)
	}
	if len(stuck) > 0 {
		return fmt.Errorf("%d activities' display did not equal the authority within %s: %s", len(stuck), 2*ttl+5*time.Second, strings.Join(stuck, ", "))
	}
	return nil
}
