package registration

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/physiciansnet/capacityd"
)

// DueRelease is an activity whose release moment has come: the rule
// (Reason: CancelUnconfirmed at confirm_by, CancelNoShow at the door) and
// the registrations it would release as read before the transaction.
type DueRelease struct {
	ActivityID      string
	Reason          CancelReason
	RegistrationIDs []string
}

// releaseChunk bounds the registrations one release command names: a
// release of many seats takes a few transactions, not one per seat, and
// an activity's chunks go one after the other.
const releaseChunk = 240

// releaseRows bounds the registrations that one pass's release commands
// name at once (queued, in a transaction, or yielding after it), over all
// its activities. The releases of several activities share change
// transactions, up to this many registrations in all (with their
// promotions, about twice as many rows), so that a storm of releases is a
// few transactions rather than one per activity, none of them long
// enough to stall the signups that share the change path for long.
const releaseRows = releaseChunk

// releaseYield and releaseYieldMax pace the release work: once a
// release command is answered, its registrations' room in releaseRows is
// kept for releaseYield times as long as the command took (at most
// releaseYieldMax) before the next command may take it. Release commands
// run on a lane of their own (Service.releases), one transaction at a
// time beside the change queue's, so a release transaction does not make
// the signups of other activities wait for its rows; but on a machine of
// few cores its work still takes the processor they would use. Yielding
// leaves the machine to other work for about six sevenths of the storm,
// so that signups elsewhere slow down by about a seventh instead of
// nearly stopping, while the storm takes about seven times its work
// (1,200 releases in 20 activities on two busy cores: about a second).
// It does not make the release cheaper.
const (
	releaseYield    = 6
	releaseYieldMax = 200 * time.Millisecond
)

// dueReleaseClaim bounds the activities one pass of the due-work loop
// claims.
const dueReleaseClaim = 20

// ReleaseDue runs the releases whose moment has come. The claimed
// activities' release commands (each checked again under its activity's
// lock, promoting the line in the same transaction) are submitted at once
// on their activities' queues of the releases' lane, where group commit
// lets one change transaction carry the releases of several activities (up to
// ChangeConfig.MaxActivities of them, and releaseRows registrations); an
// activity's chunks go one after the other, and the pass yields the
// path to other work after each of its commands (releaseYield). An
// activity whose commands all committed is recorded as done; one that
// failed keeps its claim until the lease ends and is then claimed again
// (the rule, checked again under the lock, releases nobody twice). It
// returns how many activities it released.
func (s *Service) ReleaseDue(ctx context.Context) (int, error) {
	_, done, err := s.releaseDue(ctx)
	return done, err
}

// releaseDue is ReleaseDue, also returning how many activities it
// claimed.
func (s *Service) releaseDue(ctx context.Context) (claimed, done int, err error) {
	due, err := s.store.ClaimDueReleases(ctx, s.now(), dueReleaseClaim)
	if err != nil {
		return 0, 0, err
	}
	p := &releasePass{rows: semaphore.NewWeighted(releaseRows)}
	var wg sync.WaitGroup
	for _, d := range due {
		wg.Go(func() {
			err := s.release(ctx, d, p.rows)
			if err == nil {
				err = p.markDone(ctx, s.store, d)
			}
			p.finish(err)
		})
	}
	wg.Wait()
	return len(due), p.done, errors.Join(p.errs...)
}

// releasePass is one pass of ReleaseDue: the budget of registrations its
// commands may name at once, and what its activities' releases came to.
type releasePass struct {
	rows *semaphore.Weighted
	// marking makes the records of done releases one at a time: a
	// statement each, holding one connection, as they came before.
	marking sync.Mutex

	mu   sync.Mutex
	done int
	errs []error
}

// markDone records that d's release is done.
func (p *releasePass) markDone(ctx context.Context, st Store, d DueRelease) error {
	p.marking.Lock()
	defer p.marking.Unlock()
	return st.ReleaseDone(ctx, d.ActivityID, d.Reason)
}

// finish counts one activity's release: done, or its error.
func (p *releasePass) finish(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.errs = append(p.errs, err)
		return
	}
	p.done++
}

// release submits an activity's release in chunks, one after the other,
// each within the pass's budget of rows, which it keeps while it yields
// after each chunk (releaseYield).
func (s *Service) release(ctx context.Context, d DueRelease, rows *semaphore.Weighted) error {
	o := Origin{Actor: ActorSystem}
	for ids := d.RegistrationIDs; len(ids) > 0; {
		n := min(len(ids), releaseChunk)
		if err := rows.Acquire(ctx, int64(n)); err != nil {
			return capacityd.Unavailable(err, "the release of activity %s was not submitted", d.ActivityID)
		}
		began := time.Now()
		out, err := s.submitOn(ctx, s.releases, d.ActivityID, ReleaseCommand{Origin: o, Reason: d.Reason, RegistrationIDs: ids[:n]})
		if err = cmp.Or(err, out.Err); err == nil {
			yield(ctx, min(time.Since(began)*releaseYield, releaseYieldMax))
		}
		rows.Release(int64(n))
		if err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// yield waits for d, or until ctx ends.
func yield(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Confirm confirms a registration its owner or an admin may see: see
// ConfirmCommand. A confirmed one is returned unchanged.
func (s *Service) Confirm(ctx context.Context, id string, c Caller) (Registration, error) {
	if err := validateCaller(c); err != nil {
		return Registration{}, err
	}
	r, err := s.GetRegistration(ctx, id, c)
	if err != nil {
		return r, err
	}
	return s.changeOf(ctx, r, ConfirmCommand{Origin: c.origin(), RegistrationID: id, Caller: c})
}
