package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

const eventColumns = `e.seq, a.public_id, e.registration_id, e.user_id, e.type, e.from_status, e.to_status,
	e.seats, e.seats_from, e.actor, e.request_id, e.at, e.block_id, e.list_id, e.device, e.forced, e.conflict, e.reason`

func scanEvent(row pgx.CollectableRow) (registration.Event, error) {
	var e registration.Event
	var d doorColumns
	err := row.Scan(append([]any{&e.Seq, &e.ActivityID, &e.RegistrationID, &e.UserID, &e.Type, &e.From, &e.To,
		&e.Seats, &e.SeatsFrom, &e.Actor, &e.RequestID, &e.At, &e.BlockID}, d.dest()...)...)
	e.ID, e.At, e.Door, e.Reason = registration.EventID(e.ActivityID, e.Seq), e.At.UTC(), d.door(), d.reason
	return e, err
}

// doorColumns scans the door columns of an event (NULL but on check-in
// events).
type doorColumns struct {
	list, device, conflict *string
	forced                 *bool
	// reason is a release event's, which the columns carry too.
	reason *registration.CancelReason
}

func (d *doorColumns) dest() []any {
	return []any{&d.list, &d.device, &d.forced, &d.conflict, &d.reason}
}

// door returns the event's Door, nil for an event that is not a check-in.
func (d *doorColumns) door() *registration.Door {
	if d.list == nil {
		return nil
	}
	out := &registration.Door{ListID: *d.list, Conflict: d.conflict}
	if d.device != nil {
		out.Device = *d.device
	}
	if d.forced != nil {
		out.Forced = *d.forced
	}
	return out
}

func (s *Store) events(ctx context.Context, q string, args ...any) ([]registration.Event, error) {
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, scanEvent)
	return out, interpret(err)
}

// RegistrationEvents returns a registration's events in seq order.
func (s *Store) RegistrationEvents(ctx context.Context, registrationID string) ([]registration.Event, error) {
	return s.events(ctx, `SELECT `+eventColumns+` FROM registration_event e JOIN activity a ON a.id = e.activity_id
		WHERE e.registration_id = $1 ORDER BY e.seq`, registrationID)
}

// ActivityEvents returns up to f.Limit of an activity's events with seq
// above f.After, in seq order.
func (s *Store) ActivityEvents(ctx context.Context, f registration.EventFilter) ([]registration.Event, error) {
	aid, err := s.activityID(ctx, f.ActivityID)
	if err != nil {
		return nil, err
	}
	return s.events(ctx, `SELECT `+eventColumns+` FROM registration_event e JOIN activity a ON a.id = e.activity_id
		WHERE e.activity_id = $1 AND e.seq > $2 ORDER BY e.seq LIMIT $3`, aid, f.After, f.Limit)
}
