package attendance

import (
	"context"
	"errors"
	"time"

	"github.com/physiciansnet/capacityd/internal/loop"
	"github.com/physiciansnet/capacityd/registration"
)

// Ending is what the end of an activity records of one registration that
// holds a seat: registration.attended (eligible) or registration.no_show
// (never entered); "" for one that came but is not eligible.
func Ending(a Activity, r Row) registration.EventType {
	it := Evaluate(a, r)
	switch {
	case it.Eligible:
		return registration.EventAttended
	case !it.CheckedIn:
		return registration.EventNoShow
	}
	return ""
}

// Ender is what the end of activities needs of the authority.
type Ender interface {
	// ClaimEndedActivities claims up to limit activities whose ends_at is
	// at or before now and whose end is not recorded yet, skipping those
	// another instance holds.
	ClaimEndedActivities(ctx context.Context, now time.Time, limit int) ([]string, error)
	// EndActivity records, under the activity's lock and once, the
	// events Ending gives its registrations that hold a seat, and returns
	// them (none when another instance recorded the end first).
	EndActivity(ctx context.Context, activityID string, at time.Time, ending func(Activity, Row) registration.EventType) ([]registration.Event, error)
}

// Observer is told of the events the end of an activity recorded
// (webhook delivery, the activity's event feed).
type Observer interface {
	Committed(ctx context.Context, commits []registration.Commit)
}

// Announcer tells every instance that an activity's history moved (the
// event feed's long polls wait on it).
type Announcer interface {
	Announce(ctx context.Context, id string)
}

// RunEnds runs EndDue every interval until ctx ends.
func (s *Service) RunEnds(ctx context.Context, every time.Duration) {
	loop.Every(ctx, every, s.cfg.Logger, "record the end of activities", func(ctx context.Context) error {
		_, err := s.EndDue(ctx)
		return err
	})
}

// endClaim bounds the activities one pass ends.
const endClaim = 20

// EndDue records the end of the activities whose ends_at has come: one
// registration.attended or registration.no_show per registration that
// holds a seat, once, whatever the number of instances. It returns how
// many activities it ended.
func (s *Service) EndDue(ctx context.Context) (int, error) {
	if s.cfg.Ender == nil {
		return 0, nil
	}
	now := s.cfg.Now().UTC()
	ids, err := s.cfg.Ender.ClaimEndedActivities(ctx, now, endClaim)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, id := range ids {
		evs, err := s.cfg.Ender.EndActivity(ctx, id, now, Ending)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(evs) == 0 {
			continue
		}
		if s.cfg.Announcer != nil {
			s.cfg.Announcer.Announce(ctx, id)
		}
		for _, o := range s.cfg.Observers {
			o.Committed(ctx, []registration.Commit{{ActivityID: id, Events: evs}})
		}
	}
	return len(ids) - len(errs), errors.Join(errs...)
}
