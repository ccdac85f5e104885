package httpapi

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/stream"
)

// checkinStream serves GET /v1/checkin-lists/{id}/stream: an event
// "counts" with the list's counts at once, then one on every change
// announced by any instance (coalesced), and a ping comment every
// PingInterval. The streams of one list on this instance share its reads
// (s.lists): one read of the authority per change, none per stream.
func (s *Server) checkinStream(c echo.Context) error {
	id, err := listID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	caller := callerOf(c)
	f, err := s.lists.Follow(ctx, id)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := checkin.Allowed(f.Initial(), caller); err != nil {
		return err
	}
	write := startEventStream(c)
	last := f.Initial().Counts()
	if !write(retryField, countsEvent(last)) {
		return nil
	}
	ping := time.NewTicker(s.cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.Done():
			return nil
		case <-ping.C:
			if !write(pingComment) {
				return nil
			}
		case l := <-f.Updates():
			if checkin.Allowed(l, caller) != nil {
				return nil // the caller's door role was taken off the list
			}
			if now := l.Counts(); !sameCounts(now, last) {
				last = now
				if !write(countsEvent(now)) {
					return nil
				}
			}
		}
	}
}

// newListFollowers returns what the list streams share: the lists read
// with the service's own rights (each stream checks its caller), woken by
// ListChanges, or every listStreamPoll without it.
func newListFollowers(svc CheckinService, changes Watcher) *stream.Shared[checkin.List] {
	if changes == nil {
		changes = pollWatcher(listStreamPoll)
	}
	read := func(ctx context.Context, id string) (checkin.List, error) {
		return svc.GetList(ctx, id, registration.Caller{Admin: true})
	}
	same := func(a, b checkin.List) bool {
		return sameCounts(a.Counts(), b.Counts()) && slices.Equal(a.DoorRoles, b.DoorRoles)
	}
	return stream.NewShared(changes, read, same, listStreamCoalesce, listStreamLinger)
}

// pollWatcher wakes every watcher on a timer: changes without
// announcements.
type pollWatcher time.Duration

// Watch wakes the returned channel every d until stopped.
func (d pollWatcher) Watch(string) (<-chan struct{}, func()) {
	ch, done := make(chan struct{}, 1), make(chan struct{})
	go func() {
		t := time.NewTicker(time.Duration(d))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}()
	var once sync.Once
	return ch, func() { once.Do(func() { close(done) }) }
}

// List stream timing: a change is read at most this often; without
// announcements (no ListChanges) the counts are read again this often; a
// list stays followed (its counts current) this long after its last
// stream on the instance closed, so that pages that reload or move on
// read nothing.
const (
	listStreamCoalesce = 100 * time.Millisecond
	listStreamPoll     = 5 * time.Second
	listStreamLinger   = time.Minute
)

func sameCounts(a, b checkin.Counts) bool {
	return a.CheckedIn == b.CheckedIn && a.Inside == b.Inside && a.Conflicts == b.Conflicts &&
		(a.MaxInside == nil) == (b.MaxInside == nil) && (a.MaxInside == nil || *a.MaxInside == *b.MaxInside)
}

func countsEvent(c checkin.Counts) []byte {
	b, _ := json.Marshal(c)
	out := append([]byte("event: counts\ndata: "), b...)
	return append(out, '\n', '\n')
}
