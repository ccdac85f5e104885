package registration

import "context"

// SeriesActivities returns one page of the activities that belong to a
// series, newest first, or not_found for a series that does not exist.
func (s *Service) SeriesActivities(ctx context.Context, seriesID, before string, limit int) (ActivityPage, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return ActivityPage{}, err
	}
	if _, err := s.GetSeries(ctx, seriesID); err != nil {
		return ActivityPage{}, err
	}
	items, err := s.store.SeriesActivities(ctx, seriesID, before, limit+1)
	if err != nil {
		return ActivityPage{}, err
	}
	var p ActivityPage
	p.Items, p.NextCursor = cutPage(items, limit, func(a Activity) string { return a.ID })
	return p, nil
}
