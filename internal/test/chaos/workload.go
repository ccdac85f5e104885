package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/history"
)

// users is the number of users who sign up for each activity: few, so
// that they compete for the seats and the checker's states stay small.
const users = 5

// maxAttempts bounds the attempts of a retried operation.
const maxAttempts = 6

// maxParty is the most seats one registration may hold on the activities
// that take parties.
const maxParty = 4

// poolSlots is the number of pools the workload's activities join, each
// joined by poolJoins activities before a fresh pool takes its place (the
// seats of retired activities stay taken in it).
const (
	poolSlots = 3
	poolJoins = 4
)

// seriesJoins is the number of activities that join a series before a
// fresh one takes its place; one activity in seriesEvery joins one, in
// turn, the first two of the run among them. The series allow each user
// 1 and 2 active registrations in turn, so the workload's users, who sign
// up for all of a series' activities, meet the limit.
const (
	seriesJoins = 3
	seriesEvery = 4
)

// blockEvery: one activity in blockEvery, in turn (the second of the run
// among them), gets blocks of 1 or 2 seats when it is created, whose
// seats its pools hold too: in turn, both one for a code of its own and
// one for blockRole in either order, the code's, or the role's.
// Its first signup carries a code no block has and its second a token
// with blockRole; after those, about one signup in codeShare carries its
// code, one in wrongCodeShare a code no block has (400), about one in
// roleShare a token whose roles hold blockRole and one in otherRoleShare
// a token of another role only. One operation on it in blockDeletion
// deletes one of its blocks while one lives.
const (
	blockEvery     = 8
	codeShare      = 2
	wrongCodeShare = 10
	roleShare      = 3
	otherRoleShare = 10
	blockDeletion  = 120
)

// blockRole is the role of the workload's role blocks; memberRoles the
// roles of the tokens of its members, otherRoles of the tokens of
// another role.
const blockRole = "resident"

var (
	memberRoles = []string{"staff", blockRole}
	otherRoles  = []string{"visitor"}
)

// activity is an activity of the workload and what its clients know of it.
type activity struct {
	id string
	// maxSeats is its max_seats_per_registration: 1, or maxParty on the
	// activities that take parties (whose waiting list is strict or fill).
	maxSeats int
	// pools are the ids of the pools it belongs to: none, one or two.
	pools []string
	// series is the id of the series it belongs to ("": none); code and
	// role the audiences of its blocks ("": none), which the signups keep
	// sending after the blocks' deletion.
	series     string
	code, role string
	ops        atomic.Int64
	// signups counts the signups asked for on it: on an activity with
	// blocks, the first carries a code no block has and the second a
	// token with the role, so that every run has both.
	signups  atomic.Int64
	retiring atomic.Bool

	mu     sync.Mutex
	regs   [users]known // each user's registration as last answered
	blocks []string     // the ids of its blocks while they live
}

// liveBlock returns the id of one of the activity's live blocks, picked
// by rng ("": none known).
func (a *activity) liveBlock(rng *rand.Rand) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.blocks) == 0 {
		return ""
	}
	return a.blocks[rng.IntN(len(a.blocks))]
}

// blockMade records a live block of the activity.
func (a *activity) blockMade(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.blocks = append(a.blocks, id)
}

// blockGone forgets the activity's block id.
func (a *activity) blockGone(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.blocks = slices.DeleteFunc(a.blocks, func(b string) bool { return b == id })
}

// known is what the clients know of a user's registration: its id ("":
// none known) and the seats it held when last answered (0: not known),
// which seat reductions may since have lowered, never raised.
type known struct {
	id    string
	seats int
}

func (a *activity) reg(u int) known {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.regs[u]
}

// newcomer picks a user, mostly one without a known registration: the
// others would mostly be refused as already registered.
func (a *activity) newcomer(rng *rand.Rand) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := rng.IntN(users)
	for range users {
		if a.regs[u].id == "" || rng.IntN(5) == 0 {
			break
		}
		u = (u + 1) % users
	}
	return u
}

// learn records what an answer said of user u's registration: its id
// and seats (0: the answer did not say). Seats only ever go down, so the
// fewest an answer said of the registration is the best bound.
func (a *activity) learn(u int, id string, seats int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := &a.regs[u]
	switch {
	case k.id != id:
		*k = known{id: id, seats: seats}
	case seats > 0 && (k.seats == 0 || seats < k.seats):
		k.seats = seats
	}
}

// forget forgets user u's registration if it is still id.
func (a *activity) forget(u int, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.regs[u].id == id {
		a.regs[u] = known{}
	}
}

type note struct {
	id  string
	ops atomic.Int64
}

// pool is a pool of the workload: seats its activities share.
type pool struct {
	id       string
	joins    atomic.Int64
	retiring atomic.Bool
}

// series is a series of the workload: activities of which each user
// holds at most a few registrations.
type series struct {
	id       string
	joins    atomic.Int64
	retiring atomic.Bool
}

// workload runs clients against the nodes and records what they observe.
type workload struct {
	rec   *history.Recorder
	nodes []*Node
	hc    *http.Client
	admin string
	// tokens are the users' bearer tokens: without roles, with
	// memberRoles, and with otherRoles.
	tokens, memberTokens, otherTokens [users]string
	run                               string // names this run's notes
	// opsPer is how many operations an activity or note serves before a
	// fresh one takes its place, which keeps every checked partition small.
	opsPer int64
	// ctx ends the requests in flight (the run's hard deadline); stop
	// ends the workers' loops.
	ctx  context.Context
	stop atomic.Bool
	// created counts the activities asked for, which take turns at kinds
	// and at how many pools they join.
	created atomic.Int64

	mu         sync.Mutex
	slots      []*activity
	activities []*activity
	pools      []*pool
	allPools   []*pool
	series     *series
	seriesMade int // series created, which take turns at limits
	blocked    int // activities with blocks asked for, which name their codes
	sales      []*sale
	notes      []*note
	nextNote   int
}

// do is one request of an attempt through a typed client of a node.
type do func(ctx context.Context, base string) (history.Output, error)

// attempt sends one attempt to a random node and records it.
func (w *workload) attempt(rng *rand.Rand, worker, logical, n int, kind history.Kind, in history.Input, f do) (history.Output, history.Result) {
	node := w.nodes[rng.IntN(len(w.nodes))]
	p := w.rec.Invoke(history.Op{Logical: logical, Attempt: n, Client: worker, Instance: node.Instance(), Kind: kind, Input: in})
	// Go's transport sends a request again on a new connection when the
	// first broke, if it is replayable (as one with an Idempotency-Key is):
	// a refused connection then does not mean that nothing was sent.
	var wrote atomic.Bool
	ctx := httptrace.WithClientTrace(w.ctx, &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }})
	out, err := f(ctx, node.URL)
	res := history.Answered
	var ce *client.Error
	switch {
	case err == nil:
	case errors.As(err, &ce):
		out = history.Output{Status: ce.Status, Code: ce.Code, Registration: ce.RegistrationID, Remaining: ce.Remaining,
			Registrations: ce.RegistrationIDs}
	case errors.Is(err, syscall.ECONNREFUSED) && !wrote.Load():
		res, out = history.Refused, history.Output{Error: err.Error()}
	default:
		res, out = history.Unknown, history.Output{Error: err.Error()}
	}
	p.End(res, out)
	if (kind == history.CreateActivity || kind == history.CreatePool || kind == history.CreateSeries) && res == history.Answered && out.Status == http.StatusCreated {
		p.SetKey(out.ID)
	}
	return out, res
}

// once sends one attempt of an operation of its own.
func (w *workload) once(rng *rand.Rand, worker int, kind history.Kind, in history.Input, f do) (history.Output, bool) {
	out, res := w.attempt(rng, worker, 0, 1, kind, in, f)
	return out, res == history.Answered && out.Status < 500
}

// retried sends attempts of one logical operation, each to a random node,
// until one settles it (an answer other than 503) or maxAttempts.
func (w *workload) retried(rng *rand.Rand, worker int, kind history.Kind, in history.Input, f do) (history.Output, bool) {
	out, ok, _ := w.retriedAs(rng, worker, w.rec.NewLogical(), kind, in, f)
	return out, ok
}

// retriedAs is retried as logical operation logical; it also returns the
// attempts sent.
func (w *workload) retriedAs(rng *rand.Rand, worker, logical int, kind history.Kind, in history.Input, f do) (history.Output, bool, int) {
	var out history.Output
	n := 1
	for ; n <= maxAttempts; n++ {
		var res history.Result
		out, res = w.attempt(rng, worker, logical, n, kind, in, f)
		if res == history.Answered && out.Status < 500 {
			return out, true, n
		}
		if w.ctx.Err() != nil || !sleep(w.ctx, time.Duration(n)*200*time.Millisecond+time.Duration(rng.IntN(200))*time.Millisecond) {
			break
		}
	}
	return out, false, min(n, maxAttempts)
}

// createActivity creates an activity with a small capacity, with or
// without a waiting list, retrying on another node until one is created.
// In turn, one of one seat per registration, one that takes parties of up
// to maxParty seats with a strict waiting list, and one with a fill
// waiting list; those that take parties have a few more seats and mostly
// keep a waiting list. Most join one or two of the workload's pools; in
// turn, some join the workload's series, and some get blocks.
func (w *workload) createActivity(rng *rand.Rand, worker int) (*activity, bool) {
	in := history.Input{Capacity: 2 + rng.IntN(2), Waitlist: rng.IntN(2) == 0, Users: users}
	n := w.created.Add(1)
	if kind := n % 3; kind > 0 {
		in.MaxSeats, in.Policy = maxParty, []string{"", "strict", "fill"}[kind]
		in.Capacity, in.Waitlist = 4+rng.IntN(3), rng.IntN(4) > 0
	}
	blocked := n%blockEvery == 2
	in.Pools = w.choosePools(rng, worker, n, blocked)
	if n%seriesEvery == 1 {
		if s := w.seriesToJoin(rng, worker); s != nil {
			in.Series = s.id
		}
	}
	for n := 1; n <= maxAttempts && w.ctx.Err() == nil; n++ {
		// Each attempt is an operation of its own: one without an answer
		// may have created an activity that no operation names.
		out, ok := w.once(rng, worker, history.CreateActivity, in, func(ctx context.Context, base string) (history.Output, error) {
			a, err := client.New(base, w.admin, w.hc).CreateActivity(ctx, client.NewActivity{
				Title: "chaos", Capacity: in.Capacity, Waitlist: in.Waitlist, HoldSeconds: 86400,
				MaxSeatsPerRegistration: in.MaxSeats, WaitlistPolicy: in.Policy, Pools: in.Pools, SeriesID: in.Series})
			return history.Output{Status: http.StatusCreated, ID: a.ID, Capacity: a.Capacity, Waitlist: a.Waitlist}, err
		})
		if ok && out.Status == http.StatusCreated {
			a := &activity{id: out.ID, maxSeats: max(in.MaxSeats, 1), pools: in.Pools, series: in.Series}
			if blocked {
				w.createBlocks(rng, worker, a)
			}
			w.mu.Lock()
			w.activities = append(w.activities, a)
			w.mu.Unlock()
			return a, true
		}
		sleep(w.ctx, 300*time.Millisecond)
	}
	return nil, false
}

// choosePools picks the pools of the n-th activity: two distinct pools of
// the workload's, then one, none, one, in turn, so that the activities
// created before any fault already hold every shape; the activities with
// blocks (every blockEvery-th, which would always fall on the same turn)
// take turns of their own at one, two and none.
func (w *workload) choosePools(rng *rand.Rand, worker int, n int64, blocked bool) []string {
	count := []int{2, 1, 0, 1}[(n-1)%4]
	if blocked {
		count = []int{1, 2, 0}[(n/blockEvery)%3]
	}
	var ids []string
	for _, i := range rng.Perm(poolSlots)[:count] {
		ids = append(ids, w.poolIn(rng, worker, i).id)
	}
	return ids
}

// poolIn returns the pool of slot i for a new activity to join, replacing
// one that poolJoins activities joined already.
func (w *workload) poolIn(rng *rand.Rand, worker, i int) *pool {
	w.mu.Lock()
	p := w.pools[i]
	w.mu.Unlock()
	if p.joins.Add(1) > poolJoins && p.retiring.CompareAndSwap(false, true) {
		if q, ok := w.createPool(rng, worker); ok {
			q.joins.Add(1)
			w.mu.Lock()
			w.pools[i] = q
			w.mu.Unlock()
			return q
		}
		p.retiring.Store(false)
	}
	return p
}

// createPool creates a pool of 4 to 7 seats, fewer than its activities
// have together, retrying on another node until one is created.
func (w *workload) createPool(rng *rand.Rand, worker int) (*pool, bool) {
	in := history.Input{Capacity: 4 + rng.IntN(4)}
	for n := 1; n <= maxAttempts && w.ctx.Err() == nil; n++ {
		// Each attempt is an operation of its own, as for activities.
		out, ok := w.once(rng, worker, history.CreatePool, in, func(ctx context.Context, base string) (history.Output, error) {
			p, err := client.New(base, w.admin, w.hc).CreatePool(ctx, client.NewPool{Title: "chaos", Capacity: in.Capacity})
			return history.Output{Status: http.StatusCreated, ID: p.ID, Capacity: p.Capacity}, err
		})
		if ok && out.Status == http.StatusCreated {
			p := &pool{id: out.ID}
			w.mu.Lock()
			w.allPools = append(w.allPools, p)
			w.mu.Unlock()
			return p, true
		}
		sleep(w.ctx, 300*time.Millisecond)
	}
	return nil, false
}

// seriesToJoin returns the series for a new activity to join, replacing
// one that seriesJoins activities joined already; nil when none could be
// created.
func (w *workload) seriesToJoin(rng *rand.Rand, worker int) *series {
	w.mu.Lock()
	s := w.series
	w.mu.Unlock()
	if s == nil || (s.joins.Add(1) > seriesJoins && s.retiring.CompareAndSwap(false, true)) {
		n, ok := w.createSeries(rng, worker)
		if !ok {
			if s != nil {
				s.retiring.Store(false)
			}
			return s
		}
		n.joins.Add(1)
		w.mu.Lock()
		w.series = n
		w.mu.Unlock()
		return n
	}
	return s
}

// createSeries creates a series allowing each user 1 or 2 active
// registrations (in turn), retrying on another node until one is created.
func (w *workload) createSeries(rng *rand.Rand, worker int) (*series, bool) {
	w.mu.Lock()
	in := history.Input{MaxPerUser: 1 + w.seriesMade%2}
	w.seriesMade++
	w.mu.Unlock()
	for n := 1; n <= maxAttempts && w.ctx.Err() == nil; n++ {
		// Each attempt is an operation of its own, as for activities.
		out, ok := w.once(rng, worker, history.CreateSeries, in, func(ctx context.Context, base string) (history.Output, error) {
			s, err := client.New(base, w.admin, w.hc).CreateSeries(ctx, client.NewSeries{Title: "chaos", MaxPerUser: in.MaxPerUser})
			return history.Output{Status: http.StatusCreated, ID: s.ID}, err
		})
		if ok && out.Status == http.StatusCreated {
			return &series{id: out.ID}, true
		}
		sleep(w.ctx, 300*time.Millisecond)
	}
	return nil, false
}

// createBlocks gives a new activity (before any signup) its blocks, in
// turn: both one for a code of its own and one for blockRole (so that the
// first, made before any fault, has every kind), the code's only, or the
// role's only; the older of two is picked by rng (a signup with the code
// and the role takes the older's seats while it has room).
func (w *workload) createBlocks(rng *rand.Rand, worker int, a *activity) {
	w.mu.Lock()
	w.blocked++
	n := w.blocked
	w.mu.Unlock()
	if n%3 != 0 {
		a.code = fmt.Sprintf("chaos-%s-%d", w.run, n)
	}
	if n%3 != 2 {
		a.role = blockRole
	}
	audiences := []history.Input{{Code: a.code}, {Role: a.role}}
	if rng.IntN(2) == 0 {
		slices.Reverse(audiences)
	}
	for _, in := range audiences {
		if in.Code != "" || in.Role != "" {
			w.createBlock(rng, worker, a, in)
		}
	}
}

// createBlock holds 1 or 2 seats of a's for aud's code or role, retrying
// on another node until one is created: each attempt an operation of its
// own, since one without an answer may have made a block of the same
// audience, which the model allows.
func (w *workload) createBlock(rng *rand.Rand, worker int, a *activity, aud history.Input) {
	in := history.Input{Key: a.id, Seats: 1 + rng.IntN(2), Code: aud.Code, Role: aud.Role}
	for n := 1; n <= maxAttempts && w.ctx.Err() == nil; n++ {
		out, ok := w.once(rng, worker, history.CreateBlock, in, func(ctx context.Context, base string) (history.Output, error) {
			b, err := client.New(base, w.admin, w.hc).CreateBlock(ctx, a.id, client.NewBlock{Seats: in.Seats, Code: in.Code, Role: in.Role})
			return history.Output{Status: http.StatusCreated, ID: b.ID, Seats: b.Seats}, err
		})
		if ok {
			if out.Status == http.StatusCreated {
				a.blockMade(out.ID)
			}
			return
		}
		sleep(w.ctx, 300*time.Millisecond)
	}
}

// deleteBlock deletes a's block, retried until answered (a retry may find
// it gone by the hand of an attempt without an answer).
func (w *workload) deleteBlock(rng *rand.Rand, worker int, a *activity, id string) {
	in := history.Input{Key: a.id, Block: id}
	out, ok := w.retried(rng, worker, history.DeleteBlock, in, func(ctx context.Context, base string) (history.Output, error) {
		return history.Output{Status: http.StatusNoContent}, client.New(base, w.admin, w.hc).DeleteBlock(ctx, id)
	})
	if ok && (out.Status == http.StatusNoContent || out.Status == http.StatusNotFound) {
		a.blockGone(id)
	}
}

// pickActivity returns a live activity, replacing one that has served
// its share of operations.
func (w *workload) pickActivity(rng *rand.Rand, worker int) *activity {
	w.mu.Lock()
	i := rng.IntN(len(w.slots))
	a := w.slots[i]
	w.mu.Unlock()
	if a.ops.Add(1) > w.opsPer && a.retiring.CompareAndSwap(false, true) {
		if b, ok := w.createActivity(rng, worker); ok {
			w.mu.Lock()
			w.slots[i] = b
			w.mu.Unlock()
			return b
		}
		a.retiring.Store(false)
	}
	return a
}

// pickNote returns a live note, replacing one that has served its share.
func (w *workload) pickNote(rng *rand.Rand) *note {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := rng.IntN(len(w.notes))
	if w.notes[i].ops.Add(1) > w.opsPer {
		w.nextNote++
		w.notes[i] = &note{id: fmt.Sprintf("chaos-%s-%d", w.run, w.nextNote)}
	}
	return w.notes[i]
}

// worker runs operations until the workload stops.
func (w *workload) worker(id int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(id)))
	for !w.stop.Load() && w.ctx.Err() == nil {
		if rng.IntN(100) < 15 {
			w.noteOp(rng, id)
			continue
		}
		a := w.pickActivity(rng, id)
		if b := a.liveBlock(rng); b != "" && rng.IntN(blockDeletion) == 0 {
			w.deleteBlock(rng, id, a, b)
			continue
		}
		switch p := rng.IntN(100); {
		case p < 33:
			w.signup(rng, id, a, a.newcomer(rng))
		case p < 50:
			w.cancel(rng, id, a)
		case p < 58:
			w.reduceSeats(rng, id, a)
		case p < 65:
			w.setStatus(rng, id, a)
		case p < 80:
			w.readActivity(rng, id, a.id)
		case p < 95 || (p < 97 && len(a.pools) == 0):
			w.readSeats(rng, id, a.id)
		case p < 97:
			w.readPool(rng, id, a.pools[rng.IntN(len(a.pools))])
		default:
			w.setCapacity(rng, id, a)
		}
	}
}

// signup signs user u up, for 1 to maxParty seats where the activity
// takes parties (else sending none: one); three in four carry an
// Idempotency-Key and are retried until answered. On an activity with a
// block for a code, some carry its code and a few a code no block has; on
// one with a block for a role, some carry a token with the role and a few
// one of another role.
func (w *workload) signup(rng *rand.Rand, worker int, a *activity, u int) {
	in := history.Input{Key: a.id, User: u}
	if a.maxSeats > 1 {
		in.Seats = 1 + rng.IntN(a.maxSeats)
	}
	var turn int64
	if a.code != "" || a.role != "" {
		turn = a.signups.Add(1)
	}
	if a.code != "" {
		switch p := rng.IntN(wrongCodeShare); {
		case turn == 1 || (turn > 2 && p == 0):
			in.Code = a.code + "-wrong"
		case turn > 2 && p <= wrongCodeShare/codeShare:
			in.Code = a.code
		}
	}
	bearer := w.tokens[u]
	if a.role != "" {
		// One in roleShare of the draws, and one in otherRoleShare.
		switch p := rng.IntN(otherRoleShare * roleShare); {
		case turn == 1:
		case turn == 2 || p < otherRoleShare:
			in.Roles, bearer = memberRoles, w.memberTokens[u]
		case p < otherRoleShare+roleShare:
			in.Roles, bearer = otherRoles, w.otherTokens[u]
		}
	}
	if rng.IntN(4) > 0 {
		in.IdempotencyKey = fmt.Sprintf("%s-%d-%d", w.run, worker, rng.Uint64())
	}
	f := w.signupCall(bearer, in)
	var out history.Output
	var ok bool
	if in.IdempotencyKey != "" {
		out, ok = w.retried(rng, worker, history.Signup, in, f)
	} else {
		out, ok = w.once(rng, worker, history.Signup, in, f)
	}
	if ok && out.Registration != "" {
		a.learn(u, out.Registration, out.Seats)
	}
}

// cancel cancels a user's registration, retried until answered (a cancel
// is idempotent); without one known it signs the user up instead.
func (w *workload) cancel(rng *rand.Rand, worker int, a *activity) {
	u := rng.IntN(users)
	k := a.reg(u)
	id := k.id
	if id == "" {
		w.signup(rng, worker, a, u)
		return
	}
	in := history.Input{Key: a.id, User: u, Registration: id, Held: k.seats}
	out, ok := w.cancelAs(rng, worker, w.tokens[u], in)
	if ok && (out.Status == http.StatusOK || out.Status == http.StatusNotFound) {
		a.forget(u, id)
	}
}

// setStatus moves a user's registration on (admin), once.
func (w *workload) setStatus(rng *rand.Rand, worker int, a *activity) {
	u := rng.IntN(users)
	id := a.reg(u).id
	if id == "" {
		w.signup(rng, worker, a, u)
		return
	}
	to := client.AwaitingPayment
	if rng.IntN(2) == 0 {
		to = client.Approved
	}
	in := history.Input{Key: a.id, User: u, Registration: id, To: string(to)}
	w.once(rng, worker, history.SetStatus, in, func(ctx context.Context, base string) (history.Output, error) {
		r, err := client.New(base, w.admin, w.hc).SetRegistrationStatus(ctx, id, to)
		return registrationOutput(r), err
	})
}

// reduceSeats gives some of a user's seats back, once (a retry could
// answer for a later state of the registration): mostly fewer than it is
// known to hold, sometimes as many (nothing changes) or one more
// (refused). Without a registration known it signs the user up instead.
func (w *workload) reduceSeats(rng *rand.Rand, worker int, a *activity) {
	u := rng.IntN(users)
	k := a.reg(u)
	if k.id == "" {
		w.signup(rng, worker, a, u)
		return
	}
	held := cmp.Or(k.seats, a.maxSeats)
	keep := 1 + rng.IntN(max(held-1, 1))
	if rng.IntN(5) == 0 {
		keep = 1 + rng.IntN(held+1)
	}
	in := history.Input{Key: a.id, User: u, Registration: k.id, Seats: keep, Held: k.seats}
	out, ok := w.once(rng, worker, history.ReduceSeats, in, func(ctx context.Context, base string) (history.Output, error) {
		r, err := client.New(base, w.tokens[u], w.hc).ReduceSeats(ctx, k.id, keep)
		return registrationOutput(r), err
	})
	if ok && out.Status == http.StatusOK {
		a.learn(u, k.id, out.Seats)
	}
}

// signupCall is a signup of in's user, as bearer (whose token's roles are
// in's), with in's key, seats, code and admission token.
func (w *workload) signupCall(bearer string, in history.Input) do {
	return func(ctx context.Context, base string) (history.Output, error) {
		r, err := client.New(base, bearer, w.hc).Signup(ctx, in.Key, client.SignupOptions{IdempotencyKey: in.IdempotencyKey,
			Seats: in.Seats, Code: in.Code, AdmissionToken: in.AdmissionToken})
		out := history.Output{Status: http.StatusCreated, Registration: r.Registration.ID, RegStatus: string(r.Registration.Status),
			Seats: r.Registration.Seats}
		if r.Registration.BlockID != nil {
			out.Block = *r.Registration.BlockID
		}
		if r.Waitlisted {
			out.Status = http.StatusAccepted
		}
		if r.Registration.WaitlistPosition != nil {
			out.Position = *r.Registration.WaitlistPosition
		}
		return out, err
	}
}

// cancelAs cancels in's registration as bearer, retried until answered
// (a cancel is idempotent).
func (w *workload) cancelAs(rng *rand.Rand, worker int, bearer string, in history.Input) (history.Output, bool) {
	return w.retried(rng, worker, history.Cancel, in, func(ctx context.Context, base string) (history.Output, error) {
		r, err := client.New(base, bearer, w.hc).CancelRegistration(ctx, in.Registration)
		return registrationOutput(r), err
	})
}

func registrationOutput(r client.Registration) history.Output {
	return history.Output{Status: http.StatusOK, Registration: r.ID, RegStatus: string(r.Status), Seats: r.Seats}
}

// setCapacity changes the activity's capacity (admin), once: a raise
// promotes by the waiting list's policy. Activities that take parties get
// a few more seats.
func (w *workload) setCapacity(rng *rand.Rand, worker int, a *activity) {
	c := 1 + rng.IntN(4)
	if a.maxSeats > 1 {
		c = 2 + rng.IntN(6)
	}
	w.once(rng, worker, history.SetCapacity, history.Input{Key: a.id, Capacity: c}, func(ctx context.Context, base string) (history.Output, error) {
		r, err := client.New(base, w.admin, w.hc).UpdateActivity(ctx, a.id, client.ActivityPatch{Capacity: &c})
		return activityOutput(r), err
	})
}

func activityOutput(a client.Activity) history.Output {
	return history.Output{Status: http.StatusOK, Capacity: a.Capacity, Taken: a.Taken, Waiting: a.Waiting, Waitlist: a.Waitlist,
		Reserved: a.Reserved, Remaining: new(a.Remaining)}
}

// readActivity reads the authority's counts: as an admin, since anyone
// else reads the display's.
func (w *workload) readActivity(rng *rand.Rand, worker int, id string) (history.Output, bool) {
	return w.once(rng, worker, history.ReadActivity, history.Input{Key: id}, func(ctx context.Context, base string) (history.Output, error) {
		a, err := client.New(base, w.admin, w.hc).GetActivity(ctx, id)
		return activityOutput(a), err
	})
}

// readPool reads a pool's authoritative seats, as an admin.
func (w *workload) readPool(rng *rand.Rand, worker int, id string) (history.Output, bool) {
	return w.once(rng, worker, history.ReadPool, history.Input{Key: id}, func(ctx context.Context, base string) (history.Output, error) {
		p, err := client.New(base, w.admin, w.hc).GetPool(ctx, id)
		return history.Output{Status: http.StatusOK, Capacity: p.Capacity, Taken: p.Taken, Reserved: p.Reserved, Remaining: new(p.Remaining)}, err
	})
}

// readSeats reads the display.
func (w *workload) readSeats(rng *rand.Rand, worker int, id string) (history.Output, bool) {
	return w.once(rng, worker, history.ReadSeats, history.Input{Key: id}, func(ctx context.Context, base string) (history.Output, error) {
		s, err := client.New(base, "", w.hc).Seats(ctx, id)
		return history.Output{Status: http.StatusOK, Capacity: s.Capacity, Taken: s.Taken, Waiting: s.Waiting, Source: s.Source}, err
	})
}

// noteOp views or waters a note, or reads its stats.
func (w *workload) noteOp(rng *rand.Rand, worker int) {
	n := w.pickNote(rng)
	kind := history.NoteView
	switch p := rng.IntN(100); {
	case p < 30:
		kind = history.NoteWater
	case p < 50:
		kind = history.NoteStats
	}
	w.noteRead(rng, worker, kind, n.id)
}

func (w *workload) noteRead(rng *rand.Rand, worker int, kind history.Kind, id string) (history.Output, bool) {
	return w.once(rng, worker, kind, history.Input{Key: id}, func(ctx context.Context, base string) (history.Output, error) {
		c := client.New(base, "", w.hc)
		var s client.NoteStats
		var err error
		switch kind {
		case history.NoteView:
			s, err = c.RecordView(ctx, id)
		case history.NoteWater:
			s, err = c.RecordWater(ctx, id)
		default:
			s, err = c.NoteStats(ctx, id)
		}
		return history.Output{Status: http.StatusOK, Views: s.Views, Waters: s.Waters}, err
	})
}
