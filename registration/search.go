package registration

import (
	"context"

	"github.com/physiciansnet/capacityd"
)

// ActivityUserFilter selects one user's registrations of one activity: an
// organiser's search of an activity's registrations by user id.
type ActivityUserFilter struct {
	ActivityID string
	UserID     string
	Status     Status // empty: all statuses
	After      string // public id of the last item of the previous page; "": from the first
	Limit      int
}

// ActivityUserRegistrations returns one page of a user's registrations of
// one activity (a user holds at most one active registration of an
// activity, and keeps the cancelled and expired ones), in creation order.
func (s *Service) ActivityUserRegistrations(ctx context.Context, f ActivityUserFilter) (Page, error) {
	limit, err := pageLimit(f.Limit)
	if err != nil {
		return Page{}, err
	}
	if !ValidUserIDLength(f.UserID) {
		return Page{}, capacityd.Errorf(capacityd.EInvalid, "user_id must have 1 to %d characters", MaxUserIDLen)
	}
	if f.Status != "" && !f.Status.Valid() {
		return Page{}, capacityd.Errorf(capacityd.EInvalid, "unknown status %q", f.Status)
	}
	f.Limit = limit + 1
	items, err := s.store.ActivityUserRegistrations(ctx, f)
	return pageOf(items, limit), err
}
