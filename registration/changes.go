package registration

import (
	"context"
	"errors"
	"time"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

// submit queues a command on its activity and waits for its outcome. A
// signup's display hold is given back if the command never reaches a
// transaction.
func (s *Service) submit(ctx context.Context, activityID string, c Command) (Outcome, error) {
	return s.submitOn(ctx, s.queue, activityID, c)
}

// submitOn puts a command on the activity's queue of lane q.
func (s *Service) submitOn(ctx context.Context, q *groupcommit.Group[string, Command, Outcome], activityID string, c Command) (Outcome, error) {
	if !storable(activityID) {
		return Outcome{}, ActivityNotFound(activityID)
	}
	out, err := q.Submit(ctx, activityID, c)
	if errors.Is(err, groupcommit.ErrClosed) || errors.Is(err, groupcommit.ErrWithdrawn) {
		// Never flushed: its hold goes back here.
		if sc, ok := c.(SignupCommand); ok && sc.Hold.Held() {
			s.notify(context.WithoutCancel(ctx), []Commit{{ActivityID: activityID, Failed: true, Holds: []Hold{sc.Hold}}})
		}
	}
	return out, UnavailableIfNotFlushed(err)
}

// UnavailableIfNotFlushed turns the errors of a request that no group-commit flush took
// (the service closing, or the request's deadline passing while it waited
// in its queue) into unavailable: nothing was written.
func UnavailableIfNotFlushed(err error) error {
	switch {
	case errors.Is(err, groupcommit.ErrClosed):
		return capacityd.Unavailable(err, "the service is shutting down")
	case errors.Is(err, groupcommit.ErrWithdrawn):
		return capacityd.Unavailable(err, "the request's deadline passed while it waited in its queue; nothing was written")
	}
	return err
}

// apply is the flush of the change queue: one transaction for the queued
// commands of many activities, then the observers, then the answers. A
// transaction that fails on one command's data is run again without it
// (groupcommit.Isolate): only that command is answered with the error.
func (s *Service) apply(ctx context.Context, batches []*groupcommit.Batch[string, Command, Outcome]) error {
	s.lastChange.Store(time.Now().UnixNano())
	var commits []Commit
	err := groupcommit.Isolate(func(ctx context.Context, part []*groupcommit.Batch[string, Command, Outcome]) error {
		in := make([]CommandBatch, len(part))
		for i, b := range part {
			in[i] = CommandBatch{ActivityID: b.Key, Commands: b.Reqs}
		}
		applied, err := s.transact(ctx, in)
		if err != nil {
			return err
		}
		for i, b := range part {
			if applied[i].Err != nil {
				b.Err = applied[i].Err
				continue
			}
			p := applied[i].Plan
			b.Results = p.Outcomes
			if IsPoolID(b.Key) {
				commits = append(commits, Commit{Pools: p.Pools})
				continue
			}
			commits = append(commits, commitOf(b.Key, p, holdsOf(b.Reqs)))
			s.metrics.count(p.Events)
		}
		// Activities the transaction changed without commands of their
		// own: promotions across a pool.
		for _, a := range applied[len(part):] {
			commits = append(commits, commitOf(a.Plan.Activity.ID, a.Plan, nil))
			s.metrics.count(a.Plan.Events)
		}
		return nil
	}, commandsAtFault)(ctx, batches)
	// The holds of the commands that failed go back; those of the
	// committed ones went with their commits.
	for _, b := range batches {
		var failed []Command
		for j, c := range b.Reqs {
			if err != nil || b.Err != nil || (b.Errs != nil && b.Errs[j] != nil) {
				failed = append(failed, c)
			}
		}
		if hs := holdsOf(failed); len(hs) > 0 {
			commits = append(commits, Commit{ActivityID: b.Key, Failed: true, Holds: hs})
		}
	}
	s.notify(ctx, commits)
	return err
}

// commitOf is what observers are told of one activity's committed plan.
func commitOf(activityID string, p Plan, holds []Hold) Commit {
	return Commit{ActivityID: activityID, Holds: holds, Events: p.Events, ActivityChanged: p.ActivityChanged, Pools: p.Pools,
		State: SeatState{Capacity: p.Activity.Capacity, Waitlist: p.Activity.Waitlist, Policy: p.Activity.Policy, Reserved: p.Activity.Reserved,
			Taken: p.Activity.Taken, Waiting: p.Activity.Waiting, LastSeq: p.LastSeq, UpdatedAt: p.Activity.UpdatedAt,
			Pools: p.Pools}}
}

// commandsAtFault reports whether a change transaction's failure may be the
// fault of one of its commands' data (a value the database refuses, or an
// unexpected error): such a transaction is run again without the command
// at fault. An unavailable database is nobody's fault, and an answer such
// as not_found (an activity that does not exist) is every command's of the
// batch alike: neither is split.
func commandsAtFault(err error) bool {
	switch capacityd.ErrorCode(err) {
	case capacityd.EInvalid, capacityd.EInternal:
		return true
	}
	return false
}

// transact runs one change transaction and counts it.
func (s *Service) transact(ctx context.Context, in []CommandBatch) ([]Applied, error) {
	start := time.Now()
	n := 0
	for _, b := range in {
		n += len(b.Commands)
	}
	applied, err := s.store.Apply(ctx, in, s.now())
	s.metrics.batchSize.Observe(float64(n))
	s.metrics.batchActivities.Observe(float64(len(in)))
	s.metrics.batchSeconds.Observe(time.Since(start).Seconds())
	result := "ok"
	if err != nil {
		result = "error"
	}
	s.metrics.transactions.WithLabelValues(result).Inc()
	return applied, err
}

func holdsOf(cmds []Command) []Hold {
	var hs []Hold
	for _, c := range cmds {
		if sc, ok := c.(SignupCommand); ok && sc.Hold.Held() {
			hs = append(hs, sc.Hold)
		}
	}
	return hs
}

// notify tells every observer about commits, in order.
func (s *Service) notify(ctx context.Context, commits []Commit) {
	for _, o := range s.observers {
		o.Committed(ctx, commits)
	}
}

// changeOf submits a command that names an existing registration and
// returns the registration after it.
func (s *Service) changeOf(ctx context.Context, r Registration, c Command) (Registration, error) {
	out, err := s.submit(ctx, r.ActivityID, c)
	if err != nil {
		return Registration{}, err
	}
	if out.Err != nil {
		return Registration{}, out.Err
	}
	return *out.Registration, nil
}

// Cancel cancels a registration its owner or an admin may see: it frees
// the seat, or the place on the waiting list, and the first in line takes
// a freed seat in the same transaction. Cancelling a cancelled or expired
// registration returns it unchanged and frees nothing.
func (s *Service) Cancel(ctx context.Context, id string, c Caller) (Registration, error) {
	if err := validateCaller(c); err != nil {
		return Registration{}, err
	}
	r, err := s.GetRegistration(ctx, id, c)
	if err != nil || !r.Status.Active() {
		return r, err
	}
	return s.changeOf(ctx, r, CancelCommand{Origin: c.origin(), RegistrationID: id, Caller: c})
}

// SetStatus moves a registration to awaiting_payment or approved; see
// Decide for the transitions allowed.
func (s *Service) SetStatus(ctx context.Context, id string, to Status, c Caller) (Registration, error) {
	if !to.Valid() {
		return Registration{}, capacityd.Errorf(capacityd.EInvalid, `status must be "awaiting_payment" or "approved"`)
	}
	if err := validateCaller(c); err != nil {
		return Registration{}, err
	}
	r, err := s.lookup(ctx, id)
	if err != nil {
		return Registration{}, err
	}
	if to != AwaitingPayment && to != Approved {
		return Registration{}, InvalidTransition(r, to)
	}
	return s.changeOf(ctx, r, StatusCommand{Origin: c.origin(), RegistrationID: id, To: to})
}

// ReduceSeats gives some of a registration's seats back: it keeps seats
// (1 to what it holds; the same number changes nothing). The freed seats
// go to the waiting list in the same transaction, as any release's do.
func (s *Service) ReduceSeats(ctx context.Context, id string, seats int, c Caller) (Registration, error) {
	if err := validateCaller(c); err != nil {
		return Registration{}, err
	}
	if seats < 1 || seats > MaxSeatsLimit {
		return Registration{}, capacityd.Errorf(capacityd.EInvalid, "seats must be between 1 and %d", MaxSeatsLimit)
	}
	r, err := s.GetRegistration(ctx, id, c)
	if err != nil {
		return Registration{}, err
	}
	if !r.Status.Active() || seats > r.Seats {
		return Registration{}, SeatsNotReducible(r, seats)
	}
	if seats == r.Seats {
		return r, nil
	}
	return s.changeOf(ctx, r, SeatsCommand{Origin: c.origin(), RegistrationID: id, Caller: c, Seats: seats})
}
