package registration

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/physiciansnet/capacityd/internal/loop"
)

// expiryBatch is how many due holds one claim takes.
const expiryBatch = 500

// ExpireDue expires the awaiting_payment holds that are past due: it
// claims them in batches, then applies them as commands on their
// activities' queues, where the first in line takes each freed seat. It
// returns how many it expired.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	total := 0
	for {
		due, err := s.store.ClaimDueHolds(ctx, s.now(), expiryBatch)
		if err != nil || len(due) == 0 {
			return total, err
		}
		n, err := s.expire(ctx, due)
		total += n
		s.metrics.expired.Add(float64(n))
		if err != nil || len(due) < expiryBatch || n == 0 {
			return total, err
		}
	}
}

// expire submits one expiry per due hold, all at once, and counts those
// that expired (another instance may have been first).
func (s *Service) expire(ctx context.Context, due []DueHold) (int, error) {
	origin := Origin{Actor: ActorSystem}
	return s.submitEach(ctx, len(due), func(i int) (string, Command) {
		return due[i].ActivityID, ExpireCommand{Origin: origin, RegistrationID: due[i].RegistrationID}
	})
}

// ExpireDueBlocks ends the blocks whose expiry is due: it claims them in
// batches, then applies one expiry per block on its activity's queue,
// where the seats it returns go to the waiting list. It returns how many
// it ended.
func (s *Service) ExpireDueBlocks(ctx context.Context) (int, error) {
	origin := Origin{Actor: ActorSystem}
	total := 0
	for {
		due, err := s.store.ClaimDueBlocks(ctx, s.now(), expiryBatch)
		if err != nil || len(due) == 0 {
			return total, err
		}
		n, err := s.submitEach(ctx, len(due), func(i int) (string, Command) {
			return due[i].ActivityID, BlockCommand{Origin: origin, Op: BlockExpire, BlockID: due[i].BlockID}
		})
		total += n
		if err != nil || len(due) < expiryBatch || n == 0 {
			return total, err
		}
	}
}

// submitEach submits the n commands command gives (each with its
// activity), all at once, and counts those that changed something.
func (s *Service) submitEach(ctx context.Context, n int, command func(i int) (string, Command)) (int, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	changed := 0
	for i := range n {
		wg.Go(func() {
			activityID, c := command(i)
			out, err := s.submit(ctx, activityID, c)
			mu.Lock()
			defer mu.Unlock()
			if err = cmp.Or(err, out.Err); err != nil {
				errs = append(errs, err)
			} else if out.Changed {
				changed++
			}
		})
	}
	wg.Wait()
	return changed, errors.Join(errs...)
}

// RunExpiry calls ExpireDue and ExpireDueBlocks every interval until ctx
// ends, and runs the releases beside them (RunReleases: every interval
// and at their moments). Every instance runs it.
func (s *Service) RunExpiry(ctx context.Context, every time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.RunReleases(ctx, every) })
	loop.Every(ctx, every, s.log, "expire holds and blocks", func(ctx context.Context) error {
		_, err := s.ExpireDue(ctx)
		_, blocksErr := s.ExpireDueBlocks(ctx)
		return errors.Join(err, blocksErr)
	})
}

// RunOutcomePurge deletes idempotency records older than 24 hours (plus a
// margin) every interval until ctx ends.
func (s *Service) RunOutcomePurge(ctx context.Context, every time.Duration) {
	loop.Every(ctx, every, s.log, "purge idempotency keys", func(ctx context.Context) error {
		_, err := s.store.PurgeOutcomes(ctx, s.now().Add(-25*time.Hour))
		return err
	})
}
