package registration

import (
	"time"
)

func (d *decision) patch(i int, c ActivityCommand) error {
	p := c.Patch
	schedule := p.schedule(d.act.Schedule)
	if err := schedule.validate(); err != nil {
		d.outcomes[i] = Outcome{Err: err}
		return nil
	}
	if err := d.patchOnSale(p); err != nil {
		d.outcomes[i] = Outcome{Err: err}
		return nil
	}
	d.act.Schedule = schedule
	if p.SeriesID != nil && *p.SeriesID != "" {
		if _, ok := d.w.series[*p.SeriesID]; !ok {
			d.outcomes[i] = Outcome{Err: UnknownSeries(*p.SeriesID)}
			return nil
		}
	}
	if p.Pools != nil {
		if missing := d.w.unknownPools(*p.Pools); len(missing) > 0 {
			d.outcomes[i] = Outcome{Err: UnknownPools(missing)}
			return nil
		}
		if err := d.overfullJoin(*p.Pools); err != nil {
			d.outcomes[i] = Outcome{Err: err}
			return nil
		}
		d.left = append(d.left, d.repool(*p.Pools)...)
	}
	if p.Title != nil {
		d.act.Title = *p.Title
	}
	if p.SeriesID != nil {
		d.act.SeriesID = nil
		if *p.SeriesID != "" {
			id := *p.SeriesID
			d.act.SeriesID = &id
		}
	}
	if p.HoldSeconds != nil {
		d.act.HoldSeconds = *p.HoldSeconds
	}
	if p.Waitlist != nil {
		d.act.Waitlist = *p.Waitlist
	}
	if p.Capacity != nil {
		d.act.Capacity = *p.Capacity
	}
	if p.MaxSeats != nil {
		d.act.MaxSeats = *p.MaxSeats
	}
	if p.Policy != nil {
		d.act.Policy = *p.Policy
	}
	d.act.UpdatedAt = settingsChangedAt(d.act.UpdatedAt, d.st.At)
	d.changed = true
	if err := d.promote(c.Origin); err != nil {
		return err
	}
	a := d.activity()
	d.outcomes[i] = Outcome{Activity: &a, Changed: true}
	return nil
}

// settingsChangedAt returns the updated_at of an activity whose settings
// change at now: now to the microsecond (what PostgreSQL keeps), but
// always after the last one, so that an activity's updated_at orders the
// changes of its settings (the display tier applies them in that order,
// whichever instance's commit reaches it first) even when a transaction's
// clock reads earlier than the one before it.
func settingsChangedAt(last, now time.Time) time.Time {
	now = now.Truncate(time.Microsecond)
	if !now.After(last) {
		return last.Truncate(time.Microsecond).Add(time.Microsecond)
	}
	return now
}
