package loadtest

// The soak scenario: capacityd under mixed load for a long time
// on a PostgreSQL and a Redis of its own, each restarted once in the
// middle, then checked for exactness and leaks. Run by hand:
//
//	loadtest soak -capacityd bin/capacityd -duration 10m

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// SoakConfig configures the soak scenario.
type SoakConfig struct {
	// Binary is the capacityd to run.
	Binary string
	// Duration of the load; default 10 minutes.
	Duration time.Duration
	// Clients is the number of concurrent request loops; default 32.
	Clients int
	// Streams is the number of seat streams held open; default 20.
	Streams int
	// SeatCacheTTL of the service; the display must equal the authority
	// after it. Default 10s.
	SeatCacheTTL time.Duration
	Log          io.Writer
}

// SoakResult are the soak's figures and verdicts.
type SoakResult struct {
	Duration         string        `json:"duration"`
	Requests         int64         `json:"requests"`
	ByStatus         map[int]int64 `json:"by_status"`
	Errors5xxOutside int64         `json:"errors_5xx_outside_outages"`
	Errors5xxInside  int64         `json:"errors_5xx_inside_outages"`
	TransportErrors  int64         `json:"transport_errors"`
	// TransportErrorsByOp and UnavailableByOp say which operations lost
	// their answer or got 503; SampleErrors are a few transport errors.
	TransportErrorsByOp map[string]int `json:"transport_errors_by_op"`
	UnavailableByOp     map[string]int `json:"unavailable_by_op"`
	SampleErrors        []string       `json:"sample_errors"`
	Overfull            []string       `json:"overfull_activities"`
	DisplayMismatches   []string       `json:"display_mismatches"`
	ViewMismatches      []string       `json:"view_mismatches"`
	StreamEvents        int64          `json:"stream_events"`
	Goroutines          []float64      `json:"goroutines"`
	RSSMiB              []float64      `json:"rss_mib"`
	Outages             []soakWindow   `json:"outages"`
	Ops                 map[string]int `json:"ops"`
	Pass                bool           `json:"pass"`
}

type soakWindow struct {
	What  string    `json:"what"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// SoakCommand is `loadtest soak`: it parses flags and prints the result as
// JSON; it fails when a check fails.
func SoakCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg SoakConfig
	fs.StringVar(&cfg.Binary, "capacityd", "bin/capacityd", "capacityd binary to run")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Minute, "how long the load runs")
	fs.IntVar(&cfg.Clients, "clients", 32, "concurrent request loops")
	fs.IntVar(&cfg.Streams, "streams", 20, "seat streams held open")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Log = stderr
	res, err := Soak(ctx, cfg)
	if res != nil {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(b))
	}
	if err != nil {
		return err
	}
	if !res.Pass {
		return errors.New("soak: a check failed (see the JSON)")
	}
	return nil
}

// soakState is what the load loops share.
type soakState struct {
	c          *API
	auth       *httpapi.Authenticator
	admin      string
	activities []string
	capacity   int
	notes      []string

	mu       sync.Mutex
	regs     []soakReg // registrations to cancel or move
	views    map[string]int64
	waters   map[string]int64
	status   map[int]int64
	ops      map[string]int
	outages  []soakWindow
	in5xx    int64
	out5xx   int64
	transErr int64
	errByOp  map[string]int
	unavByOp map[string]int
	samples  []string
	requests atomic.Int64
	users    atomic.Int64
	events   atomic.Int64
}

type soakReg struct{ id, token string }

// Soak runs the scenario.
func Soak(ctx context.Context, cfg SoakConfig) (*SoakResult, error) {
	cfg.setDefaults()
	logf := func(format string, args ...any) {
		fmt.Fprintf(cfg.Log, "soak %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	// The private servers are testenv's, in a session of this program.
	env := testenv.NewSession(slog.New(slog.NewTextHandler(cfg.Log, nil)))
	defer env.Close()
	var pg *testenv.PostgresServer
	var rd *testenv.RedisServer
	if err := env.Do(func() { pg, rd = testenv.PrivatePostgres(env), testenv.PrivateRedis(env) }); err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	logf("private PostgreSQL %s, Redis %s", pg.URL, rd.URL())

	const secret = "soak-secret-soak-secret-soak-secret-soak"
	srv, err := StartServer(ctx, ServerConfig{
		Binary: cfg.Binary, DatabaseURL: pg.URL, RedisURL: rd.URL(), Secret: secret,
		Env: []string{"SEAT_CACHE_TTL=" + cfg.SeatCacheTTL.String(), "EXPIRY_INTERVAL=1s", "RECONCILE_INTERVAL=5s"},
	})
	if err != nil {
		return nil, err
	}
	defer srv.Stop(stopGrace)
	c, err := NewAPI(srv.URL)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	auth, err := httpapi.NewAuthenticator([]byte(secret))
	if err != nil {
		return nil, err
	}
	st, err := newSoakState(ctx, c, auth)
	if err != nil {
		return nil, err
	}

	res := &SoakResult{ByStatus: map[int]int64{}}
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.Clients {
		wg.Go(func() { st.loop(loadCtx, w) })
	}
	for i := range cfg.Streams {
		wg.Go(func() { st.stream(loadCtx, st.activities[i%len(st.activities)]) })
	}
	wg.Go(func() { res.sample(loadCtx, c, max(cfg.Duration/20, 5*time.Second)) })
	// The faults: Redis at a third, PostgreSQL at two thirds.
	wg.Go(func() {
		if !sleepCtx(loadCtx, cfg.Duration/3) {
			return
		}
		st.outage(loadCtx, "redis", func() {
			logf("killing Redis")
			rd.Kill()
		}, func() {
			if err := env.Do(func() { rd.Start(env) }); err != nil {
				logf("restart Redis: %v", err)
			}
			logf("Redis back")
		})
		if !sleepCtx(loadCtx, cfg.Duration/3-8*time.Second) {
			return
		}
		st.outage(loadCtx, "postgres", func() {
			logf("stopping PostgreSQL")
			pg.Stop()
		}, func() {
			if err := env.Do(func() { pg.Start(env) }); err != nil {
				logf("restart PostgreSQL: %v", err)
			}
			waitReady(loadCtx, c, 60*time.Second)
			logf("PostgreSQL back")
		})
	})
	wg.Wait()
	res.Duration = time.Since(start).Round(time.Second).String()
	logf("load done after %s; waiting the cache TTL", res.Duration)
	time.Sleep(cfg.SeatCacheTTL + 2*time.Second)
	if g, rss := sampleProcess(ctx, c); g > 0 {
		res.Goroutines = append(res.Goroutines, g)
		res.RSSMiB = append(res.RSSMiB, rss/(1<<20))
	}
	st.check(ctx, res)
	return res, nil
}

// sample records the server's goroutines and resident memory every
// interval until ctx ends.
func (res *SoakResult) sample(ctx context.Context, c *API, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if g, rss := sampleProcess(ctx, c); g > 0 {
			res.Goroutines = append(res.Goroutines, g)
			res.RSSMiB = append(res.RSSMiB, rss/(1<<20))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setDefaults fills the zero fields of cfg with the soak's defaults.
func (cfg *SoakConfig) setDefaults() {
	if cfg.Duration == 0 {
		cfg.Duration = 10 * time.Minute
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 32
	}
	if cfg.Streams <= 0 {
		cfg.Streams = 20
	}
	if cfg.SeatCacheTTL <= 0 {
		cfg.SeatCacheTTL = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
}

// newSoakState creates the soak's 20 activities through c and names its
// 10 notes.
func newSoakState(ctx context.Context, c *API, auth *httpapi.Authenticator) (*soakState, error) {
	admin, _ := auth.Sign("soak-admin", true, 24*time.Hour)
	st := &soakState{
		c: c, auth: auth, admin: admin, capacity: 40,
		views: map[string]int64{}, waters: map[string]int64{}, status: map[int]int64{}, ops: map[string]int{},
		errByOp: map[string]int{}, unavByOp: map[string]int{},
	}
	for i := range 20 {
		a, err := c.WithToken(admin).CreateActivity(ctx, client.NewActivity{Title: fmt.Sprintf("soak %d", i), Capacity: st.capacity})
		if err != nil {
			return nil, err
		}
		st.activities = append(st.activities, a.ID)
	}
	for i := range 10 {
		st.notes = append(st.notes, fmt.Sprintf("soak-note-%d", i))
	}
	return st, nil
}

// outage takes one private server down inside a window of st's outages
// named what: the window opens, down stops the server, five seconds later
// up brings it back (returning once the service may use it again), and the
// window closes three seconds after that.
func (st *soakState) outage(ctx context.Context, what string, down, up func()) {
	w := soakWindow{What: what, Start: time.Now()}
	st.setOutage(w)
	down()
	sleepCtx(ctx, 5*time.Second)
	up()
	sleepCtx(ctx, 3*time.Second)
	w.End = time.Now()
	st.setOutage(w)
}

func (st *soakState) setOutage(w soakWindow) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := range st.outages {
		if st.outages[i].Start.Equal(w.Start) {
			st.outages[i] = w
			return
		}
	}
	st.outages = append(st.outages, w)
}

// inOutage reports whether a request started at t overlaps an outage.
func (st *soakState) inOutage(start, end time.Time) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, w := range st.outages {
		if !start.After(orNow(w.End)) && !end.Before(w.Start) {
			return true
		}
	}
	return false
}

func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().Add(time.Hour)
	}
	return t
}

func (st *soakState) record(op string, status int, err error, start time.Time) {
	st.requests.Add(1)
	inside := st.inOutage(start, time.Now())
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ops[op]++
	if err != nil {
		st.transErr++
		st.errByOp[op]++
		if len(st.samples) < 5 {
			st.samples = append(st.samples, op+": "+err.Error())
		}
		return
	}
	if status == http.StatusServiceUnavailable {
		st.unavByOp[op]++
	}
	st.status[status]++
	if status >= 500 {
		if inside {
			st.in5xx++
		} else {
			st.out5xx++
		}
	}
}

// loop is one client: a random mix of signups, cancels, status changes,
// seat reads, views and waters, until stop ends. A request in flight then
// runs to its answer, so that every increment the service commits is one
// the soak counts.
func (st *soakState) loop(stop context.Context, w int) {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	ctx := context.WithoutCancel(stop)
	for stop.Err() == nil {
		act := st.activities[rng.IntN(len(st.activities))]
		note := st.notes[rng.IntN(len(st.notes))]
		start := time.Now()
		op, status, err := st.do(ctx, rng, act, note)
		if op != "" {
			st.record(op, status, err, start)
		}
	}
}

// do sends one request of the mix and returns its operation ("" when
// there was nothing to do) and its answer as answer returns it.
func (st *soakState) do(ctx context.Context, rng *rand.Rand, act, note string) (string, int, error) {
	switch p := rng.IntN(100); {
	case p < 25:
		tok, _ := st.auth.Sign(fmt.Sprintf("soak-%d", st.users.Add(1)), false, 24*time.Hour)
		res, err := st.c.WithToken(tok).Signup(ctx, act, client.SignupOptions{})
		status, err := signupAnswer(res, err)
		if status == http.StatusCreated {
			st.mu.Lock()
			st.regs = append(st.regs, soakReg{res.Registration.ID, tok})
			st.mu.Unlock()
		}
		return "signup", status, err
	case p < 40:
		r, ok := st.takeReg(rng)
		if !ok {
			return "", 0, nil
		}
		_, err := st.c.WithToken(r.token).CancelRegistration(ctx, r.id)
		status, err := answer(err, http.StatusOK)
		return "cancel", status, err
	case p < 45:
		r, ok := st.peekReg(rng)
		if !ok {
			return "", 0, nil
		}
		to := []client.Status{client.AwaitingPayment, client.Approved}[rng.IntN(2)]
		_, err := st.c.WithToken(st.admin).SetRegistrationStatus(ctx, r.id, to)
		status, err := answer(err, http.StatusOK)
		return "status", status, err
	case p < 70:
		_, err := st.c.Seats(ctx, act)
		status, err := answer(err, http.StatusOK)
		return "seats", status, err
	case p < 90:
		_, err := st.c.RecordView(ctx, note)
		return st.acknowledge("view", st.views, note, err)
	default:
		_, err := st.c.RecordWater(ctx, note)
		return st.acknowledge("water", st.waters, note, err)
	}
}

// acknowledge counts an increment of note in counts when the service
// acknowledged it, and returns op and the answer as do does.
func (st *soakState) acknowledge(op string, counts map[string]int64, note string, err error) (string, int, error) {
	status, err := answer(err, http.StatusOK)
	if status == http.StatusOK {
		st.mu.Lock()
		counts[note]++
		st.mu.Unlock()
	}
	return op, status, err
}

func (st *soakState) takeReg(rng *rand.Rand) (soakReg, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.regs) == 0 {
		return soakReg{}, false
	}
	i := rng.IntN(len(st.regs))
	r := st.regs[i]
	st.regs[i] = st.regs[len(st.regs)-1]
	st.regs = st.regs[:len(st.regs)-1]
	return r, true
}

func (st *soakState) peekReg(rng *rand.Rand) (soakReg, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.regs) == 0 {
		return soakReg{}, false
	}
	return st.regs[rng.IntN(len(st.regs))], true
}

// stream holds a seat stream open, reconnecting, and counts its events.
func (st *soakState) stream(ctx context.Context, activity string) {
	api := client.New(st.c.BaseURL, "", &http.Client{}) // no timeout: streams last
	for ctx.Err() == nil {
		if s, err := api.StreamSeats(ctx, activity); err == nil {
			for _, err := s.Next(); err == nil; _, err = s.Next() {
				st.events.Add(1)
			}
			s.Close()
		}
		sleepCtx(ctx, time.Second)
	}
}
