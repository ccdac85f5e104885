package registration

import (
	"context"
	"time"
)

// RunReleases calls ReleaseDue until ctx ends: every interval, again at
// once after a pass that claimed as many activities as a pass may, and at
// the next release moment the store knows of within the interval, so that
// a release does not wait up to an interval for the next pass. Every
// instance runs it; the claims keep them from releasing the same activity.
func (s *Service) RunReleases(ctx context.Context, every time.Duration) {
	t := time.NewTimer(s.untilNextRelease(ctx, every))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			t.Reset(s.releasePass(ctx, every))
		}
	}
}

// releasePass runs one pass of ReleaseDue and returns how long to wait
// for the next.
func (s *Service) releasePass(ctx context.Context, every time.Duration) time.Duration {
	runCtx, cancel := context.WithTimeout(ctx, every+10*time.Second)
	defer cancel()
	claimed, _, err := s.releaseDue(runCtx)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("release due seats failed", "err", err)
	}
	if claimed >= dueReleaseClaim {
		return 0
	}
	return s.untilNextRelease(runCtx, every)
}

// untilNextRelease returns how long until the next release moment the
// store knows of, at most every.
func (s *Service) untilNextRelease(ctx context.Context, every time.Duration) time.Duration {
	now := s.now()
	at, found, err := s.store.NextDueRelease(ctx, now, now.Add(every))
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("read the next release moment failed", "err", err)
		}
		return every
	}
	if !found {
		return every
	}
	return min(max(at.Sub(now), 0), every)
}
