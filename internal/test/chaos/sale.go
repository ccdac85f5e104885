package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/history"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// The on-sales: activities that open saleOpensIn into the run behind an
// admission queue, and buyers who join their lines, poll their places as
// told (at most pollAtMost apart, so that the run stays short) and sign up
// with their admission token once admitted. One sells out (no waiting
// list: the places still waiting when it fills are sold out, and
// cancellations later let the line move again); the other keeps a waiting
// list and admits one at a time, so that a token let go stalls its line
// for token_seconds and absent holders' places lapse.
const (
	buyers      = 8
	saleOpensIn = 3 * time.Second
	pollAtMost  = time.Second
	// lateBuyers join after the opening; the others before it, to be
	// shuffled.
	lateBuyers = 2
)

// saleSpec is an on-sale's activity: its seats, whether it keeps a
// waiting list, and its queue (places lapse after 10 s without their
// holder, the API's shortest; a token let go stalls the line that admits
// one at a time for longer than that).
type saleSpec struct {
	seats    int
	waitlist bool
	queue    history.Queue
}

var saleSpecs = []saleSpec{
	{seats: 4, queue: history.Queue{AdmitPerSecond: 2, MaxAdmitted: 3, TokenSeconds: 10, AbsentSeconds: 10}},
	{seats: 3, waitlist: true, queue: history.Queue{AdmitPerSecond: 1, MaxAdmitted: 1, TokenSeconds: 15, AbsentSeconds: 10}},
}

// sale is an on-sale activity of the workload and its buyers' bearer
// tokens.
type sale struct {
	id    string
	opens time.Time
	// absent is the queue's absent_seconds.
	absent  time.Duration
	bearers *[buyers]string
}

// openSales creates the on-sale activities, each retried on another node
// until created; sign makes the buyers' bearer tokens (a buyer is the same
// user in every sale).
func (w *workload) openSales(rng *rand.Rand, sign func(sub string, admin bool) string) bool {
	var bearers [buyers]string
	for b := range buyers {
		bearers[b] = sign(buyerID(b), false)
	}
	opens := time.Now().Add(saleOpensIn).Truncate(time.Millisecond)
	for _, spec := range saleSpecs {
		if !w.openSale(rng, spec, opens, &bearers) {
			return false
		}
	}
	return true
}

func (w *workload) openSale(rng *rand.Rand, spec saleSpec, opens time.Time, bearers *[buyers]string) bool {
	opensAt, q := w.rec.At(opens), spec.queue
	in := history.Input{Capacity: spec.seats, Waitlist: spec.waitlist, Users: buyers, OpensAt: &opensAt, Queue: &q}
	for n := 1; n <= maxAttempts && w.ctx.Err() == nil; n++ {
		out, ok := w.once(rng, 0, history.CreateActivity, in, func(ctx context.Context, base string) (history.Output, error) {
			a, err := client.New(base, w.admin, w.hc).CreateActivity(ctx, client.NewActivity{Title: "chaos on-sale", Capacity: in.Capacity,
				Waitlist: in.Waitlist, HoldSeconds: 86400, OpensAt: &opens, Queue: &client.QueueSettings{AdmitPerSecond: q.AdmitPerSecond,
					MaxAdmitted: q.MaxAdmitted, TokenSeconds: q.TokenSeconds, AbsentSeconds: q.AbsentSeconds}})
			return history.Output{Status: http.StatusCreated, ID: a.ID, Capacity: a.Capacity, Waitlist: a.Waitlist}, err
		})
		if ok && out.Status == http.StatusCreated {
			w.mu.Lock()
			w.activities = append(w.activities, &activity{id: out.ID, maxSeats: 1})
			w.sales = append(w.sales, &sale{id: out.ID, opens: opens, absent: time.Duration(q.AbsentSeconds) * time.Second, bearers: bearers})
			w.mu.Unlock()
			return true
		}
		sleep(w.ctx, 300*time.Millisecond)
	}
	return false
}

func buyerID(b int) string { return fmt.Sprintf("buyer-%d", b) }

// startBuyers starts every sale's buyers on wg, as clients first,
// first+1, ….
func (w *workload) startBuyers(wg *sync.WaitGroup, first int, seed uint64) {
	w.mu.Lock()
	sales := append([]*sale(nil), w.sales...)
	w.mu.Unlock()
	for i, s := range sales {
		for b := range buyers {
			client := first + i*buyers + b
			wg.Go(func() { w.buyer(s, b, client, seed) })
		}
	}
}

// buyer follows the line as buyer b until the workload stops: joins,
// polls as told, signs up when admitted, joins again when its place
// lapses or its token expires. Some vary: one in three first tries a
// signup without a token; one in five goes away once for longer than the
// queue's absence allowed (its place lapses); one in four lets its first
// token expire unused; one in two that got a seat gives it back.
func (w *workload) buyer(s *sale, b, worker int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(1000+worker)))
	if b >= buyers-lateBuyers && !w.pause(time.Until(s.opens)+time.Duration(rng.IntN(5000))*time.Millisecond) {
		return
	}
	if b%3 == 0 {
		w.saleSignup(rng, worker, s, b, "")
	}
	t, ok := w.joinQueue(rng, worker, s, b)
	wandered, skipped := b%5 != 4, ""
	if b%4 != 3 {
		skipped = "-" // no token is let go
	}
	for w.running() {
		wait := pollAtMost
		if ok {
			wait = min(wait, time.Duration(t.PollAfterMS)*time.Millisecond)
		}
		if !wandered && ok && t.State == "waiting" && t.Position != nil {
			wandered, wait = true, s.absent+3*time.Second
		}
		if !w.pause(wait) {
			return
		}
		var out history.Output
		out, ok = w.readQueue(rng, worker, s, b)
		t = ticketOf(out)
		switch {
		case !ok:
		case t.State == "expired":
			t, ok = w.joinQueue(rng, worker, s, b)
		case t.State == "admitted" && skipped == "":
			skipped = out.Token
		case t.State == "admitted" && out.Token != skipped:
			r, _ := w.saleSignup(rng, worker, s, b, out.Token)
			switch {
			case r.Status == http.StatusCreated || r.Status == http.StatusAccepted:
				w.giveBack(rng, worker, s, b, r.Registration)
				return
			case r.Code == "activity_full":
				skipped = out.Token // the token stays unused: it expires
			}
		}
	}
}

// giveBack cancels one time in two, a little later, the registration a
// buyer got (seated or waitlisted), and reads its place once more (used).
func (w *workload) giveBack(rng *rand.Rand, worker int, s *sale, b int, reg string) {
	if rng.IntN(2) == 0 && w.pause(time.Second+time.Duration(rng.IntN(2000))*time.Millisecond) {
		w.cancelAs(rng, worker, s.bearers[b], history.Input{Key: s.id, User: b, Registration: reg, Held: 1})
	}
	if w.pause(pollAtMost) {
		w.readQueue(rng, worker, s, b)
	}
}

// running reports whether the workload goes on.
func (w *workload) running() bool { return !w.stop.Load() && w.ctx.Err() == nil }

// pause waits d, or less when the workload stops; it reports whether the
// workload goes on.
func (w *workload) pause(d time.Duration) bool {
	for d > 0 && w.running() {
		step := min(d, 250*time.Millisecond)
		if !sleep(w.ctx, step) {
			return false
		}
		d -= step
	}
	return w.running()
}

// ticket is the part of a recorded answer that a buyer follows.
type ticket struct {
	State       string
	Position    *int64
	PollAfterMS int64
}

func ticketOf(o history.Output) ticket {
	t := ticket{State: o.QueueState, PollAfterMS: o.PollAfterMS}
	if o.QueuePosition > 0 {
		t.Position = &o.QueuePosition
	}
	return t
}

// queueOutput records a ticket.
func (w *workload) queueOutput(t client.Ticket) history.Output {
	o := history.Output{Status: http.StatusOK, QueueState: t.State, PollAfterMS: t.PollAfterMS}
	if t.Position != nil {
		o.QueuePosition = *t.Position
	}
	if t.AdmissionToken != nil {
		o.Token = *t.AdmissionToken
	}
	if t.TokenExpiresAt != nil {
		o.TokenExpires = w.rec.At(*t.TokenExpiresAt)
	}
	return o
}

// joinQueue takes (or returns) buyer b's place, retried until answered:
// a join returns the place the buyer holds.
func (w *workload) joinQueue(rng *rand.Rand, worker int, s *sale, b int) (ticket, bool) {
	out, ok := w.retried(rng, worker, history.JoinQueue, history.Input{Key: s.id, User: b}, func(ctx context.Context, base string) (history.Output, error) {
		t, err := client.New(base, s.bearers[b], w.hc).JoinQueue(ctx, s.id)
		return w.queueOutput(t), err
	})
	return ticketOf(out), ok && out.Status == http.StatusOK
}

// readQueue reads buyer b's place, once.
func (w *workload) readQueue(rng *rand.Rand, worker int, s *sale, b int) (history.Output, bool) {
	out, ok := w.once(rng, worker, history.ReadQueue, history.Input{Key: s.id, User: b}, func(ctx context.Context, base string) (history.Output, error) {
		t, err := client.New(base, s.bearers[b], w.hc).QueueTicket(ctx, s.id)
		return w.queueOutput(t), err
	})
	return out, ok && out.Status == http.StatusOK
}

// saleSignup signs buyer b up with token ("": none). Three in four carry
// an Idempotency-Key and are retried until answered; half of those taken
// are sent once more, a replay that must answer the same registration.
func (w *workload) saleSignup(rng *rand.Rand, worker int, s *sale, b int, token string) (history.Output, bool) {
	in := history.Input{Key: s.id, User: b, AdmissionToken: token}
	if rng.IntN(4) > 0 {
		in.IdempotencyKey = fmt.Sprintf("%s-sale-%d-%d", w.run, b, rng.Uint64())
	}
	f := w.signupCall(s.bearers[b], in)
	if in.IdempotencyKey == "" {
		return w.once(rng, worker, history.Signup, in, f)
	}
	logical := w.rec.NewLogical()
	out, ok, n := w.retriedAs(rng, worker, logical, history.Signup, in, f)
	if ok && out.Status == http.StatusCreated && rng.IntN(2) == 0 {
		w.attempt(rng, worker, logical, n+1, history.Signup, in, f)
	}
	return out, ok
}

// recordAuthority records the sales' places and registrations as the
// authority keeps them, for the queue check.
func (w *workload) recordAuthority(t testing.TB, c *Cluster) {
	t.Helper()
	w.mu.Lock()
	var ids []string
	for _, s := range w.sales {
		ids = append(ids, s.id)
	}
	w.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	url := ""
	if c.Formation != nil {
		url = c.Formation.URL()
	} else {
		url = c.Postgres.URL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := testenv.Pool(t, url, 2)
	defer db.Close()
	rows, _ := db.Query(ctx, `SELECT a.public_id, t.user_id, coalesce(t.position, 0), t.state, coalesce(t.token, ''),
			t.joined_at, t.last_seen_at, t.admitted_at, t.token_expires_at
		FROM queue_ticket t JOIN activity a ON a.id = t.activity_id WHERE a.public_id = ANY($1) ORDER BY t.id`, ids)
	places, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (history.Place, error) {
		var p history.Place
		var user string
		var joined, seen time.Time
		var admitted, expires *time.Time
		err := row.Scan(&p.Key, &user, &p.Position, &p.State, &p.Token, &joined, &seen, &admitted, &expires)
		p.User, p.JoinedAt, p.LastSeenAt, p.AdmittedAt, p.TokenExpires = buyerIndex(user), w.rec.At(joined), w.rec.At(seen),
			w.atOrZero(admitted), w.atOrZero(expires)
		return p, err
	})
	if err != nil {
		t.Logf("chaos: queue places not read: %v", err)
		return
	}
	rows, _ = db.Query(ctx, `SELECT r.public_id, a.public_id, r.user_id, r.status FROM registration r
		JOIN activity a ON a.id = r.activity_id WHERE a.public_id = ANY($1) ORDER BY r.id`, ids)
	regs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (history.Registration, error) {
		var r history.Registration
		var user string
		err := row.Scan(&r.ID, &r.Key, &user, &r.Status)
		r.User = buyerIndex(user)
		return r, err
	})
	if err != nil {
		t.Logf("chaos: registrations not read: %v", err)
		return
	}
	auth := history.Authority{Places: places, Registrations: regs}
	w.rec.SetAuthority(auth)
}

// atOrZero is t on the recorder's clock, 0 for none.
func (w *workload) atOrZero(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return w.rec.At(*t)
}

// buyerIndex is the index of a buyer's user id (-1: not a buyer's).
func buyerIndex(user string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(user, "buyer-"))
	if err != nil || !strings.HasPrefix(user, "buyer-") {
		return -1
	}
	return n
}

// Sales counts what a history did with on-sales.
type Sales struct {
	// Joins and Polls answered 200.
	Joins, Polls int
	// Signups on them answered: Taken (201), Replayed (an attempt of a
	// taken signup answered again), Closed (409 registration_closed),
	// Refused (403 admission_required) and Full (409 activity_full).
	Signups, Taken, Replayed, Closed, Refused, Full int
	// Places the authority kept: Admitted ever, Lapsed (expired without
	// an admission), TokensExpired (expired after one), SoldOut.
	Places, Admitted, Lapsed, TokensExpired, SoldOut int
}

// SalesOf counts the on-sales of h.
func SalesOf(h history.History) Sales {
	var s Sales
	queued := map[string]bool{}
	taken := map[int]int{} // logical → its attempts answered 201
	for _, op := range h.Ops {
		if op.Result != history.Answered {
			continue
		}
		switch o := op.Output; {
		case op.Kind == history.CreateActivity && o.Status == http.StatusCreated && op.Input.Queue != nil:
			queued[op.Input.Key] = true
		case op.Kind == history.JoinQueue && o.Status == http.StatusOK:
			s.Joins++
		case op.Kind == history.ReadQueue && o.Status == http.StatusOK:
			s.Polls++
		case op.Kind == history.Signup && queued[op.Input.Key] && o.Status < 500:
			s.Signups++
			switch {
			case o.Status == http.StatusCreated:
				taken[op.Logical]++
			case o.Code == "registration_closed":
				s.Closed++
			case o.Code == "admission_required":
				s.Refused++
			case o.Code == "activity_full":
				s.Full++
			}
		}
	}
	for _, n := range taken {
		s.Taken++
		s.Replayed += n - 1
	}
	if h.Authority != nil {
		for _, p := range h.Authority.Places {
			s.Places++
			switch {
			case p.AdmittedAt != 0:
				s.Admitted++
				if p.State == "expired" {
					s.TokensExpired++
				}
			case p.State == "expired":
				s.Lapsed++
			case p.State == "sold_out":
				s.SoldOut++
			}
		}
	}
	return s
}
