package chaos

import (
	"context"
	"errors"
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
	// confirmBy and noShowsAt are the moments of its release rules (nil:
	// none): see releaseEvery.
	confirmBy, noShowsAt *time.Time

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
	// doors are the check-in lists of the activities and their answers.
	doors doors
	// racers run at the activities' release moments (release.go), each
	// action as client racerClients.Add(1).
	racers       sync.WaitGroup
	racerClients atomic.Int64
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
