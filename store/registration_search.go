package store

import (
	"context"

	"github.com/physiciansnet/capacityd/registration"
)

// ActivityUserRegistrations returns up to f.Limit of a user's
// registrations of one activity created after the one of public id
// f.After, in creation order, of f.Status when it is set. It reads the
// user's registrations by registration_user_idx (user_id, id), in the
// index's order from the cursor on, keeping the activity's: a user holds
// few registrations, whatever the size of the activity.
func (s *Store) ActivityUserRegistrations(ctx context.Context, f registration.ActivityUserFilter) ([]registration.Registration, error) {
	aid, err := s.activityID(ctx, f.ActivityID)
	if err != nil {
		return nil, err
	}
	after, err := s.registrationAfterInActivity(ctx, f.After, aid)
	if err != nil {
		return nil, err
	}
	return s.collect(ctx, activityUserSQL, f.UserID, aid, after, f.Limit, string(f.Status))
}

// activityUserSQL reads a page of a user's registrations of an activity
// (by internal id), of a status when $5 is not empty.
const activityUserSQL = `SELECT ` + withPosition + ` FROM registration r JOIN activity a ON a.id = r.activity_id
	WHERE r.user_id = $1 AND r.activity_id = $2 AND r.id > $3 AND ($5 = '' OR r.status = $5)
	ORDER BY r.id LIMIT $4`
