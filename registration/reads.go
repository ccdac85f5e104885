package registration

import (
	"context"
	"slices"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

// GetRegistration returns a registration its owner or an admin may see;
// anyone else gets not_found.
func (s *Service) GetRegistration(ctx context.Context, id string, c Caller) (Registration, error) {
	r, err := s.lookup(ctx, id)
	if err != nil {
		return Registration{}, err
	}
	if !c.Admin && r.UserID != c.UserID {
		return Registration{}, RegistrationNotFound(id)
	}
	return r, nil
}

// lookup is one registration's answer from a batched lookup.
type lookup struct {
	reg   Registration
	found bool
}

// lookup returns the registration id, read with the lookups of other
// requests.
func (s *Service) lookup(ctx context.Context, id string) (Registration, error) {
	if !storable(id) {
		return Registration{}, RegistrationNotFound(id)
	}
	l, err := s.lookups.Submit(ctx, struct{}{}, id)
	switch {
	case err != nil:
		return Registration{}, UnavailableIfNotFlushed(err)
	case !l.found:
		return Registration{}, RegistrationNotFound(id)
	}
	return l.reg, nil
}

// lookupBatches is the flush of the lookups; a lookup that fails on one
// request's id is made again without it (groupcommit.Isolate).
func (s *Service) lookupBatches(ctx context.Context, batches []*groupcommit.Batch[struct{}, string, lookup]) error {
	return groupcommit.Isolate(groupcommit.PerKey(s.lookupAll), commandsAtFault)(ctx, batches)
}

// lookupAll looks up the ids of one flush in one statement.
func (s *Service) lookupAll(ctx context.Context, _ struct{}, ids []string) ([]lookup, error) {
	regs, err := s.store.GetRegistrations(ctx, slices.Compact(slices.Sorted(slices.Values(ids))))
	if err != nil {
		return nil, err
	}
	byID := make(map[string]Registration, len(regs))
	for _, r := range regs {
		byID[r.ID] = r
	}
	out := make([]lookup, len(ids))
	for i, id := range ids {
		out[i].reg, out[i].found = byID[id]
	}
	return out, nil
}

// ListRegistrations returns one page of an activity's registrations in
// creation order.
func (s *Service) ListRegistrations(ctx context.Context, f ListFilter) (Page, error) {
	limit, err := pageLimit(f.Limit)
	if err != nil {
		return Page{}, err
	}
	if f.Status != "" && !f.Status.Valid() {
		return Page{}, capacityd.Errorf(capacityd.EInvalid, "unknown status %q", f.Status)
	}
	if _, err := s.store.GetActivity(ctx, f.ActivityID); err != nil {
		return Page{}, err
	}
	f.Limit = limit + 1
	items, err := s.store.ListRegistrations(ctx, f)
	return pageOf(items, limit), err
}

// ExportRegistrations streams an activity's registrations (of status, when
// set) in creation order to emit; see Store.ExportRegistrations. The
// activity must exist.
func (s *Service) ExportRegistrations(ctx context.Context, activityID string, status Status, emit func(Registration) error) error {
	if status != "" && !status.Valid() {
		return capacityd.Errorf(capacityd.EInvalid, "unknown status %q", status)
	}
	if _, err := s.store.GetActivity(ctx, activityID); err != nil {
		return err
	}
	return s.store.ExportRegistrations(ctx, activityID, status, emit)
}

// UserRegistrations returns one page of a user's own registrations over
// all activities, newest first.
func (s *Service) UserRegistrations(ctx context.Context, f UserFilter) (Page, error) {
	limit, err := pageLimit(f.Limit)
	if err != nil {
		return Page{}, err
	}
	f.Limit = limit + 1
	items, err := s.store.UserRegistrations(ctx, f)
	return pageOf(items, limit), err
}

func pageLimit(n int) (int, error) {
	if n == 0 {
		return DefaultListLimit, nil
	}
	if n < 1 || n > MaxListLimit {
		return 0, capacityd.Errorf(capacityd.EInvalid, "limit must be between 1 and %d", MaxListLimit)
	}
	return n, nil
}

// pageOf cuts registrations (read with one extra) to a page of limit.
func pageOf(items []Registration, limit int) Page {
	var p Page
	p.Items, p.NextCursor = cutPage(items, limit, func(r Registration) string { return r.ID })
	return p
}

// cutPage cuts items, read with one extra, to limit (never nil, so that
// an empty page is an empty list) and returns the cursor of the next page
// when the extra one was there.
func cutPage[T any](items []T, limit int, id func(T) string) ([]T, *string) {
	if items == nil {
		return []T{}, nil
	}
	if len(items) <= limit {
		return items, nil
	}
	items = items[:limit]
	c := EncodeCursor(id(items[limit-1]))
	return items, &c
}
