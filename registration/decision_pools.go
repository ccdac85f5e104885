package registration

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/physiciansnet/capacityd"
)

// repool moves the activity into the pools ids (all read): its seats
// leave the pools it leaves and join those it joins. It returns the pools
// it left.
func (d *decision) repool(ids []string) []*Pool {
	var left []*Pool
	var next []*Pool
	for _, p := range d.pools {
		if !slices.Contains(ids, p.ID) {
			p.Taken -= d.act.Taken
			p.Reserved -= d.act.Reserved
			p.Activities = slices.DeleteFunc(p.Activities, func(id string) bool { return id == d.act.ID })
			left = append(left, p)
			d.w.pools[p.ID].Changed = true
		} else {
			next = append(next, p)
		}
	}
	for _, id := range ids {
		if slices.ContainsFunc(d.pools, func(p *Pool) bool { return p.ID == id }) {
			continue
		}
		pp := d.w.pools[id]
		pp.Pool.Taken += d.act.Taken
		pp.Pool.Reserved += d.act.Reserved
		pp.Pool.Activities = append(pp.Pool.Activities, d.act.ID)
		slices.Sort(pp.Pool.Activities)
		pp.Changed = true
		next = append(next, &pp.Pool)
	}
	slices.SortFunc(next, func(a, b *Pool) int { return cmp.Compare(a.ID, b.ID) })
	d.pools = next
	d.act.Pools = slices.Clone(ids)
	slices.Sort(d.act.Pools)
	return left
}

// overfullJoin returns activity_full when the activity, joining the pools
// ids, would bring a pool it is not in past its capacity with its taken
// and reserved seats (a pool never reads more seats taken than it holds
// because of a join; a lowered capacity may, as an activity's may).
func (d *decision) overfullJoin(ids []string) error {
	brought := d.act.Taken + d.act.Reserved
	if brought == 0 {
		return nil
	}
	for _, id := range ids {
		if slices.ContainsFunc(d.pools, func(p *Pool) bool { return p.ID == id }) {
			continue
		}
		room := d.w.pools[id].Pool.SeatRoom()
		if room.Free() >= brought {
			continue
		}
		remaining := room.Remaining()
		return &capacityd.Error{Code: capacityd.EActivityFull, Remaining: &remaining,
			Message: fmt.Sprintf("pool %s has %s left: activity %s, with %s taken or reserved, cannot join it", id,
				seatCount(remaining), d.act.ID, seatCount(brought))}
	}
	return nil
}
