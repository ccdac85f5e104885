package registration

import (
	"context"
	"time"
)

// RegistrationEvents returns the events of a registration its owner or an
// admin may see, in seq order.
func (s *Service) RegistrationEvents(ctx context.Context, id string, c Caller) ([]Event, error) {
	if _, err := s.GetRegistration(ctx, id, c); err != nil {
		return nil, err
	}
	evs, err := s.store.RegistrationEvents(ctx, id)
	if evs == nil {
		evs = []Event{}
	}
	return evs, err
}

// feedPoll is how often an empty long poll re-reads the feed when no
// Changes wake it.
const feedPoll = time.Second

// ActivityEvents returns the activity's events after f.After. With f.Wait,
// an empty page waits up to that long for the next event, woken by the
// activity's change announcements: it holds no database connection while
// it waits.
func (s *Service) ActivityEvents(ctx context.Context, f EventFilter) (EventPage, error) {
	if err := f.Validate(); err != nil {
		return EventPage{}, err
	}
	var changed <-chan struct{}
	var poll <-chan time.Time
	if f.Wait > 0 {
		if s.changes != nil {
			ch, stop := s.changes.Watch(f.ActivityID)
			defer stop()
			changed = ch
		} else {
			t := time.NewTicker(feedPoll)
			defer t.Stop()
			poll = t.C
		}
	}
	timeout := time.NewTimer(f.Wait)
	defer timeout.Stop()
	for {
		evs, err := s.store.ActivityEvents(ctx, f)
		if err != nil {
			return EventPage{}, err
		}
		if len(evs) > 0 || f.Wait == 0 {
			return eventPage(evs, f.After), nil
		}
		select {
		case <-changed:
		case <-poll:
		case <-timeout.C:
			return eventPage(nil, f.After), nil
		case <-ctx.Done():
			return eventPage(nil, f.After), nil
		}
	}
}

func eventPage(evs []Event, after int64) EventPage {
	p := EventPage{Items: evs, NextAfter: after}
	if len(evs) > 0 {
		p.NextAfter = evs[len(evs)-1].Seq
	}
	if p.Items == nil {
		p.Items = []Event{}
	}
	return p
}
