package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

const eventColumns = `e.seq, a.public_id, e.registration_id, e.user_id, e.type, e.from_status, e.to_status,
	e.seats, e.seats_from, e.actor, e.request_id, e.at, e.block_id`

func scanEvent(row pgx.CollectableRow) (registration.Event, error) {
	var e registration.Event
	err := row.Scan(&e.Seq, &e.ActivityID, &e.RegistrationID, &e.UserID, &e.Type, &e.From, &e.To,
		&e.Seats, &e.SeatsFrom, &e.Actor, &e.RequestID, &e.At, &e.BlockID)
	e.ID, e.At = registration.EventID(e.ActivityID, e.Seq), e.At.UTC()
	return e, err
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
