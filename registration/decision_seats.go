package registration

// fits reports whether n seats are free now, in the activity and its
// pools.
func (d *decision) fits(n int) bool { return d.counts(0).Fits(n) }

// take counts n more seats taken, in the activity and its pools.
func (d *decision) take(n int) {
	d.act.Taken += n
	for _, p := range d.pools {
		p.Taken += n
	}
}

// remaining is what a new signup could get now.
func (d *decision) remaining() int { return d.counts(0).Remaining() }

func (d *decision) waiting() int { return d.act.Waiting }

// counts returns the activity's counts as they stand, for Admit of a
// signup for seats.
func (d *decision) counts(seats int) Counts {
	return NewCounts(d.act.SeatRoom(), d.act.Waiting, d.act.Waitlist, d.act.Policy, d.pools).For(seats)
}
