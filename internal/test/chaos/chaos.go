// Package chaos runs capacityd as real processes under a concurrent
// client workload (parties of 1 to 4 seats on half the activities, strict
// or fill waiting lists, seat reductions, most activities in one or two
// of three overlapping pools, some with blocks of seats for a code or for
// a role of the users' tokens, some
// in series that limit each user's registrations) while it injects
// faults — instances killed with SIGKILL and restarted, Redis killed,
// flushed and restarted, PostgreSQL restarted, and latency, bandwidth
// limits, resets and half-open connections on the instances' links
// (toxiproxy, in process) — while buyers follow two on-sales' admission
// queues, records what the clients observe (internal/test/history) and checks
// it (internal/test/histcheck): a linearizable authority (blocks' reserved
// seats included), pools never over their capacity and lines left with
// nothing that fits, no user over a series' limit, admission in position
// order with single-use tokens, a display that errs only by changes in
// flight and converges within its TTL once quiet, and exact note
// counters.
package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
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

// Result is what a run observed and the check's verdict.
type Result struct {
	History history.History
	Report  histcheck.Report
	// Faults counts the faults injected by class.
	Faults map[Class]int
	// Converged is nil when every activity's display equalled the
	// authority within twice the TTL once the faults and the workload
	// stopped.
	Converged error
	// Violations are exchanges that broke the API description.
	Violations []string
	// Recoveries are, for each postgres_failover, the time from the
	// primary's SIGKILL to the answer of the first signup sent after it
	// that was taken (201 or 202).
	Recoveries []time.Duration
	// Cluster is what the run ran on (still running until the test ends).
	Cluster *Cluster
	// CheckTook is how long the check of the history took.
	CheckTook time.Duration
}

// OK reports whether the run kept every promise.
func (r Result) OK() bool { return r.Report.OK() && r.Converged == nil && len(r.Violations) == 0 }

// Summary describes the run in a few lines: operations, parties, faults,
// verdicts.
func (r Result) Summary() string {
	var b strings.Builder
	kinds := map[history.Kind]int{}
	results := map[history.Result]int{}
	logical := map[int]bool{}
	for _, op := range r.History.Ops {
		kinds[op.Kind]++
		results[op.Result]++
		logical[op.Logical] = true
	}
	fmt.Fprintf(&b, "operations: %d requests (%d logical operations): %d answered, %d without an answer, %d refused connections\n",
		len(r.History.Ops), len(logical), results[history.Answered], results[history.Unknown], results[history.Refused])
	var names []string
	for k := range kinds {
		names = append(names, string(k))
	}
	sort.Strings(names)
	b.WriteString("  by kind:")
	for _, k := range names {
		fmt.Fprintf(&b, " %s %d", k, kinds[history.Kind(k)])
	}
	p := PartiesOf(r.History)
	fmt.Fprintf(&b, "\nparties: %d activities take parties (%d strict, %d fill); %d signups for 2-%d seats answered (%d seated, %d waitlisted, %d full); %d seat reductions answered (%d to fewer seats than known)",
		p.Activities, p.Strict, p.Activities-p.Strict, p.Signups, maxParty, p.Seated, p.Waitlisted, p.Full, p.Reductions, p.Reduced)
	pl := PoolsOf(r.History)
	fmt.Fprintf(&b, "\npools: %d created; %d activities in one pool, %d in two; %d signups on them answered (%d seated, %d waitlisted, %d full); %d pool reads answered (%d of a full pool, %d with reserved seats); %d activities in pools with blocks",
		pl.Pools, pl.InOne, pl.InTwo, pl.Signups, pl.Seated, pl.Waitlisted, pl.Full, pl.Reads, pl.FullReads, pl.ReservedReads, pl.Blocked)
	bl := BlocksOf(r.History)
	fmt.Fprintf(&b, "\nblocks: %d created (%d refused full), %d deleted (%d found gone); %d signups with a code answered (%d seated, %d waitlisted, %d full, %d refused for a code no live block has); %d activity reads with reserved seats",
		bl.Created, bl.Full, bl.Deleted, bl.Gone, bl.Signups, bl.Seated, bl.Waitlisted, bl.SignupsFull, bl.BadCode, bl.ReservedReads)
	fmt.Fprintf(&b, "\n  roles: %d blocks for a role created; %d signups with the role answered (%d with a code too): %d seated from a block of the role, %d from a block of a code, %d on public seats, %d waitlisted, %d full; %d signups with another role answered (%d seated from a block)",
		bl.RoleBlocks, bl.RoleSignups, bl.RoleAndCode, bl.FromRoleBlock, bl.RoleFromCodeBlock, bl.RolePublic, bl.RoleWaitlisted, bl.RoleFull,
		bl.OtherRoleSignups, bl.OtherRoleFromBlock)
	se := SeriesOf(r.History)
	fmt.Fprintf(&b, "\nseries: %d created; %d activities in series; %d signups on them answered (%d taken, %d at the limit)",
		se.Series, se.Activities, se.Signups, se.Taken, se.LimitReached)
	sa := SalesOf(r.History)
	fmt.Fprintf(&b, "\non-sale: %d joins and %d polls answered; %d signups answered (%d taken, %d of them replayed, %d before the opening, %d without a valid token, %d full); %d places (%d admitted, %d of them expired unused; %d lapsed, %d sold out)",
		sa.Joins, sa.Polls, sa.Signups, sa.Taken, sa.Replayed, sa.Closed, sa.Refused, sa.Full, sa.Places, sa.Admitted, sa.TokensExpired, sa.Lapsed, sa.SoldOut)
	b.WriteString("\nfaults:")
	total := 0
	for _, cl := range everyClass {
		if n, ok := r.Faults[cl]; ok {
			fmt.Fprintf(&b, " %s %d", cl, n)
			total += n
		}
	}
	fmt.Fprintf(&b, " (%d in all)\n", total)
	if len(r.Recoveries) > 0 {
		fmt.Fprintf(&b, "failovers: first signup answered %v after the primary's SIGKILL\n", r.Recoveries)
	}
	fmt.Fprintf(&b, "check: %s\n", r.CheckTook.Round(time.Millisecond))
	b.WriteString(r.Report.String())
	if r.Converged != nil {
		fmt.Fprintf(&b, "display convergence: %v\n", r.Converged)
	} else {
		b.WriteString("display convergence: every activity's display equals the authority\n")
	}
	if len(r.Violations) > 0 {
		fmt.Fprintf(&b, "API description violations: %d, first: %s\n", len(r.Violations), r.Violations[0])
	}
	verdict := "OK"
	if !r.OK() {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "verdict: %s", verdict)
	return b.String()
}

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
	rng := rand.New(rand.NewPCG(seed, 0))
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

	res := Result{Faults: in.counts, Cluster: c}
	res.Converged = settle(t, w, ttl)
	w.recordAuthority(t, c)
	res.History = rec.History()
	res.Recoveries = Recoveries(res.History)
	checkStart := time.Now()
	res.Report = histcheck.Check(res.History, histcheck.Options{
		// A request may run for the flush timeout after its client gave
		// up, then its hold lives at most a TTL.
		OrphanWindow: clientTimeout + 10*time.Second + ttl,
		FaultSlack:   3 * time.Second,
		Timeout:      2 * time.Minute,
	})
	res.CheckTook = time.Since(checkStart)
	vmu.Lock()
	res.Violations = violations
	vmu.Unlock()
	return res
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

// Recoveries returns, for each postgres_failover fault of h, the time
// from its start (the primary's SIGKILL) to the answer of the first
// signup sent after it that was taken (201 or 202).
func Recoveries(h history.History) []time.Duration {
	var out []time.Duration
	for _, f := range h.Faults {
		if f.Class != string(PostgresFailover) {
			continue
		}
		first := int64(-1)
		for _, op := range h.Ops {
			if op.Kind == history.Signup && op.Call >= f.Start && op.Result == history.Answered &&
				(op.Output.Status == http.StatusCreated || op.Output.Status == http.StatusAccepted) &&
				(first < 0 || op.Return < first) {
				first = op.Return
			}
		}
		if first >= 0 {
			out = append(out, time.Duration(first-f.Start))
		}
	}
	return out
}

// Parties counts what a history did with groups.
type Parties struct {
	// Activities that take parties, Strict of them with a strict
	// waiting list.
	Activities, Strict int
	// Signups for more than one seat that were answered, and how:
	// Seated (201), Waitlisted (202) or Full (409 activity_full).
	Signups, Seated, Waitlisted, Full int
	// Reductions answered, Reduced of them 200 to fewer seats than the
	// client knew the registration to hold (a change, unless another
	// client's reduction had made it first).
	Reductions, Reduced int
}

// PartiesOf counts the parties of h.
func PartiesOf(h history.History) Parties {
	var p Parties
	for _, op := range h.Ops {
		if op.Result != history.Answered {
			continue
		}
		switch o := op.Output; {
		case op.Kind == history.CreateActivity && o.Status == http.StatusCreated && op.Input.MaxSeats > 1:
			p.Activities++
			if op.Input.Policy != "fill" {
				p.Strict++
			}
		case op.Kind == history.Signup && op.Input.Seats > 1 && o.Status < 500:
			p.Signups++
			switch {
			case o.Status == http.StatusCreated:
				p.Seated++
			case o.Status == http.StatusAccepted:
				p.Waitlisted++
			case o.Code == "activity_full":
				p.Full++
			}
		case op.Kind == history.ReduceSeats && o.Status < 500:
			p.Reductions++
			if o.Status == http.StatusOK && op.Input.Held > op.Input.Seats {
				p.Reduced++
			}
		}
	}
	return p
}

// Pools counts what a history did with pools.
type Pools struct {
	// Pools created, and activities created in one pool (InOne) or in two
	// (InTwo).
	Pools, InOne, InTwo int
	// Signups on activities in pools that were answered, and how: Seated
	// (201), Waitlisted (202) or Full (409 activity_full).
	Signups, Seated, Waitlisted, Full int
	// Reads of pools answered 200, FullReads of them with no seat left,
	// and ReservedReads of them that showed seats its activities' blocks
	// hold.
	Reads, FullReads, ReservedReads int
	// Blocked are the activities in pools that got a block at creation.
	Blocked int
}

// PoolsOf counts the pools of h.
func PoolsOf(h history.History) Pools {
	var p Pools
	pooled, blocked := map[string]bool{}, map[string]bool{}
	for _, op := range h.Ops {
		if op.Result != history.Answered {
			continue
		}
		switch o := op.Output; {
		case op.Kind == history.CreatePool && o.Status == http.StatusCreated:
			p.Pools++
		case op.Kind == history.CreateActivity && o.Status == http.StatusCreated && len(op.Input.Pools) > 0:
			pooled[op.Input.Key] = true
			if len(op.Input.Pools) == 1 {
				p.InOne++
			} else {
				p.InTwo++
			}
		case op.Kind == history.Signup && pooled[op.Input.Key] && o.Status < 500:
			p.Signups++
			switch {
			case o.Status == http.StatusCreated:
				p.Seated++
			case o.Status == http.StatusAccepted:
				p.Waitlisted++
			case o.Code == "activity_full":
				p.Full++
			}
		case op.Kind == history.ReadPool && o.Status == http.StatusOK:
			p.Reads++
			if o.Taken >= o.Capacity {
				p.FullReads++
			}
			if o.Reserved > 0 {
				p.ReservedReads++
			}
		case op.Kind == history.CreateBlock && o.Status == http.StatusCreated && pooled[op.Input.Key] && !blocked[op.Input.Key]:
			blocked[op.Input.Key] = true
			p.Blocked++
		}
	}
	return p
}

// Blocks counts what a history did with blocks.
type Blocks struct {
	// Created blocks (201), and creations refused as Full; Deleted
	// (204), and deletions that found the block Gone (404).
	Created, Full, Deleted, Gone int
	// Signups with a code that were answered, and how: Seated (201),
	// Waitlisted (202), SignupsFull (409 activity_full), or BadCode (400:
	// no live block has the code).
	Signups, Seated, Waitlisted, SignupsFull, BadCode int
	// ReservedReads are authoritative activity reads that showed reserved
	// seats.
	ReservedReads int
	// RoleBlocks are the blocks for a role created. RoleSignups are the
	// answered signups whose token holds blockRole (RoleAndCode of them
	// with a code too): seated FromRoleBlock, RoleFromCodeBlock, or on
	// RolePublic seats, RoleWaitlisted, or RoleFull (409 activity_full).
	RoleBlocks, RoleSignups, RoleAndCode                                   int
	FromRoleBlock, RoleFromCodeBlock, RolePublic, RoleWaitlisted, RoleFull int
	// OtherRoleSignups are the answered signups whose token holds other
	// roles only, OtherRoleFromBlock of them seated from a block (of
	// their code).
	OtherRoleSignups, OtherRoleFromBlock int
}

// BlocksOf counts the blocks of h.
func BlocksOf(h history.History) Blocks {
	var b Blocks
	roleBlocks := map[string]bool{}
	for _, op := range h.Ops {
		if op.Result == history.Answered && op.Kind == history.CreateBlock && op.Output.Status == http.StatusCreated && op.Input.Role != "" {
			roleBlocks[op.Output.ID] = true
		}
	}
	b.RoleBlocks = len(roleBlocks)
	for _, op := range h.Ops {
		if op.Result != history.Answered {
			continue
		}
		if op.Kind == history.Signup && len(op.Input.Roles) > 0 && op.Output.Status < 500 {
			b.countRoles(op, roleBlocks[op.Output.Block])
		}
		switch o := op.Output; {
		case op.Kind == history.CreateBlock && o.Status == http.StatusCreated:
			b.Created++
		case op.Kind == history.CreateBlock && o.Code == "activity_full":
			b.Full++
		case op.Kind == history.DeleteBlock && o.Status == http.StatusNoContent:
			b.Deleted++
		case op.Kind == history.DeleteBlock && o.Status == http.StatusNotFound:
			b.Gone++
		case op.Kind == history.Signup && op.Input.Code != "" && o.Status < 500:
			b.Signups++
			switch {
			case o.Status == http.StatusCreated:
				b.Seated++
			case o.Status == http.StatusAccepted:
				b.Waitlisted++
			case o.Code == "activity_full":
				b.SignupsFull++
			case o.Status == http.StatusBadRequest:
				b.BadCode++
			}
		case op.Kind == history.ReadActivity && o.Status == http.StatusOK && o.Reserved > 0:
			b.ReservedReads++
		}
	}
	return b
}

// countRoles counts an answered signup with roles; fromRole: its
// registration took seats of a block for a role.
func (b *Blocks) countRoles(op history.Op, fromRole bool) {
	o := op.Output
	if !slices.Contains(op.Input.Roles, blockRole) {
		b.OtherRoleSignups++
		if o.Block != "" {
			b.OtherRoleFromBlock++
		}
		return
	}
	b.RoleSignups++
	if op.Input.Code != "" {
		b.RoleAndCode++
	}
	switch {
	case o.Status == http.StatusCreated && fromRole:
		b.FromRoleBlock++
	case o.Status == http.StatusCreated && o.Block != "":
		b.RoleFromCodeBlock++
	case o.Status == http.StatusCreated:
		b.RolePublic++
	case o.Status == http.StatusAccepted:
		b.RoleWaitlisted++
	case o.Code == "activity_full":
		b.RoleFull++
	}
}

// SeriesCounts counts what a history did with series.
type SeriesCounts struct {
	// Series created, and Activities created in one.
	Series, Activities int
	// Signups on activities in series that were answered, Taken of them
	// (201 or 202), LimitReached of them refused at the user's limit.
	Signups, Taken, LimitReached int
}

// SeriesOf counts the series of h.
func SeriesOf(h history.History) SeriesCounts {
	var c SeriesCounts
	inSeries := map[string]bool{}
	for _, op := range h.Ops {
		if op.Result != history.Answered {
			continue
		}
		switch o := op.Output; {
		case op.Kind == history.CreateSeries && o.Status == http.StatusCreated:
			c.Series++
		case op.Kind == history.CreateActivity && o.Status == http.StatusCreated && op.Input.Series != "":
			inSeries[op.Input.Key] = true
			c.Activities++
		case op.Kind == history.Signup && inSeries[op.Input.Key] && o.Status < 500:
			c.Signups++
			switch {
			case o.Status == http.StatusCreated || o.Status == http.StatusAccepted:
				c.Taken++
			case o.Code == "limit_reached":
				c.LimitReached++
			}
		}
	}
	return c
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
// display on every node until they agree (within twice the TTL), every
// pool's authority, and every note's stats, all recorded in the history.
// It returns what did not converge.
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
