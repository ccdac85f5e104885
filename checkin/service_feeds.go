package checkin

import (
	"context"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

// CheckinPage is one page of a list's history.
type CheckinPage struct {
	Items     []CheckIn `json:"items"`
	NextAfter int64     `json:"next_after"`
}

// Checkins returns a page of a list's check-ins after seq after.
func (s *Service) Checkins(ctx context.Context, listID string, after int64, limit int, c registration.Caller) (CheckinPage, error) {
	if _, err := s.GetList(ctx, listID, c); err != nil {
		return CheckinPage{}, err
	}
	cis, err := s.cfg.Store.Checkins(ctx, listID, after, limit)
	if err != nil {
		return CheckinPage{}, err
	}
	page := CheckinPage{Items: cis, NextAfter: after}
	if len(cis) > 0 {
		page.NextAfter = cis[len(cis)-1].Seq
	}
	if page.Items == nil {
		page.Items = []CheckIn{}
	}
	return page, nil
}

// syncPoll is how often a quiet long poll of the sync feed looks again
// when no announcement wakes it.
const syncPoll = time.Second

// Tickets returns a page of a list's ticket sync feed. With wait, a page
// of changes that is empty waits up to that long for one.
func (s *Service) Tickets(ctx context.Context, listID, cursor string, limit int, wait time.Duration, c registration.Caller) (SyncPage, error) {
	l, err := s.GetList(ctx, listID, c)
	if err != nil {
		return SyncPage{}, err
	}
	var cur *SyncCursor
	if cursor != "" {
		parsed, err := DecodeSyncCursor(cursor)
		if err != nil {
			return SyncPage{}, err
		}
		cur = &parsed
	}
	var woken <-chan struct{}
	if wait > 0 && cur != nil && s.cfg.Announcer != nil {
		ch := make(chan struct{}, 1)
		for _, id := range l.ActivityIDs {
			w, stop := s.cfg.Announcer.Watch(id)
			defer stop()
			go relay(ctx, w, ch)
		}
		woken = ch
	}
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	poll := time.NewTicker(syncPoll)
	defer poll.Stop()
	for {
		page, err := s.cfg.Store.SyncTickets(ctx, listID, cur, limit)
		if err != nil || len(page.Items) > 0 || wait <= 0 || cur == nil || cur.Full {
			return page, err
		}
		select {
		case <-woken:
		case <-poll.C:
		case <-timeout.C:
			return page, nil
		case <-ctx.Done():
			return page, nil
		}
	}
}

// relay passes the signals of one watch on to ch until ctx ends or the
// watch closes.
func relay(ctx context.Context, from <-chan struct{}, to chan struct{}) {
	for {
		select {
		case _, ok := <-from:
			if !ok {
				return
			}
			select {
			case to <- struct{}{}:
			default:
			}
		case <-ctx.Done():
			return
		}
	}
}
