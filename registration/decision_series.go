package registration

import (
	"fmt"
	"slices"
)

// seriesOf returns the series state of the activity's series, nil when it
// is in none.
func (d *decision) seriesOf() (*SeriesState, error) {
	if d.act.SeriesID == nil {
		return nil, nil
	}
	sr, ok := d.w.series[*d.act.SeriesID]
	if !ok {
		return nil, fmt.Errorf("registration: series %s of activity %s was not read", *d.act.SeriesID, d.act.ID)
	}
	return sr, nil
}

// seriesRefusal returns why the user may not take one more active
// registration in the activity's series: limit_reached when they already
// hold the most it allows (or the error of a series that was not read);
// nil when they may.
func (d *decision) seriesRefusal(user string) error {
	sr, err := d.seriesOf()
	if sr == nil || err != nil {
		return err
	}
	if held := sr.Held[user]; len(held) >= sr.MaxPerUser {
		return LimitReached(sr.ID, sr.MaxPerUser, held)
	}
	return nil
}

// holdInSeries counts r as one of its user's active registrations in the
// activity's series (held) or no more (released).
func (d *decision) holdInSeries(r *Registration, held bool) {
	if d.act.SeriesID == nil {
		return
	}
	sr, ok := d.w.series[*d.act.SeriesID]
	if !ok {
		return // no signup of the transaction needs it
	}
	ids := slices.DeleteFunc(sr.Held[r.UserID], func(id string) bool { return id == r.ID })
	if held {
		ids = append(ids, r.ID)
	}
	sr.Held[r.UserID] = ids
}
