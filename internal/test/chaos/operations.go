package chaos

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/history"
)

// worker runs operations until the workload stops.
func (w *workload) worker(id int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(id)))
	for !w.stop.Load() && w.ctx.Err() == nil {
		if rng.IntN(100) < 15 {
			w.noteOp(rng, id)
			continue
		}
		a := w.pickActivity(rng, id)
		if rng.IntN(100) < doorShare {
			w.scanAtDoor(rng, id, a)
			continue
		}
		if a.confirmBy != nil && rng.IntN(100) < confirmShare {
			w.confirm(rng, id, a, rng.IntN(users))
			continue
		}
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
