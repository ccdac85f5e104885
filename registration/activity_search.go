package registration

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/physiciansnet/capacityd"
)

// SearchActivities returns one page of the activities whose title contains
// query, ignoring case, newest first; the page's NextCursor continues the
// same search. An empty query (spaces aside) lists every activity, as
// ListActivities does.
func (s *Service) SearchActivities(ctx context.Context, query, before string, limit int) (ActivityPage, error) {
	query = strings.TrimSpace(query)
	if query == "" {
		return s.ListActivities(ctx, before, limit)
	}
	if utf8.RuneCountInString(query) > MaxTitleLen || !storable(query) {
		return ActivityPage{}, capacityd.Errorf(capacityd.EInvalid, "q must be valid UTF-8 of at most %d characters, without NUL characters", MaxTitleLen)
	}
	limit, err := pageLimit(limit)
	if err != nil {
		return ActivityPage{}, err
	}
	items, err := s.store.SearchActivities(ctx, query, before, limit+1)
	if err != nil {
		return ActivityPage{}, err
	}
	var p ActivityPage
	p.Items, p.NextCursor = cutPage(items, limit, func(a Activity) string { return a.ID })
	return p, nil
}
