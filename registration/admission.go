package registration

// Room is the seats of one capacity, an activity's or a pool's, as the
// admission rule sees them.
type Room struct {
	// Pool is the pool's id; "" for an activity's own room.
	Pool string
	// Capacity is the most seats it holds.
	Capacity int
	// Taken is the seats taken (for the display tier's gate, taken +
	// held); it may exceed Capacity (a lowered capacity never evicts).
	Taken int
	// Reserved is the unused seats of blocks: free for their audiences
	// only.
	Reserved int
}

// SeatRoom returns the room itself: a Room is a Seated.
func (r Room) SeatRoom() Room { return r }

// Free returns capacity - taken - reserved: the seats a signup outside a
// block could take (negative when overfull).
func (r Room) Free() int { return r.Capacity - r.Taken - r.Reserved }

// Remaining returns the free seats, never below zero.
func (r Room) Remaining() int { return max(0, r.Free()) }

// Seated is anything with a Room: an activity, a pool, their seat states.
type Seated interface {
	SeatRoom() Room
}

// Counts are what the admission rule looks at: an activity's seats and
// waiting list, as the one who asks sees them, and the seats asked for.
// NewCounts builds them.
type Counts struct {
	// Capacity is the activity's capacity.
	Capacity int
	// Taken is the seats taken: occupying registrations at the authority;
	// for the display tier's gate, taken + held (seats held for signups in
	// flight). It may exceed Capacity (a lowered capacity never evicts).
	Taken int
	// Reserved is the unused seats of the activity's blocks: free for
	// their audiences only.
	Reserved int
	// Waiting is the length of the waiting list.
	Waiting int
	// Waitlist is the activity's waiting-list setting.
	Waitlist bool
	// Fill is true under the waiting-list policy PolicyFill.
	Fill bool
	// Seats is the seats the signup asks for; 0 means 1.
	Seats int
	// Pooled is true when the activity belongs to pools, and Shared is
	// then the fewest seats left in them (the least Room.Free over its
	// pools), SharedPool the id of that pool; PoolCapacity is the least
	// capacity of them, SmallestPool the id of that one. A signup must fit
	// the activity and every pool.
	Pooled       bool
	Shared       int
	SharedPool   string
	PoolCapacity int
	SmallestPool string
}

// NewCounts is the one constructor of Counts: an activity's own room and
// waiting line (waiting registrations, its waiting-list setting and
// policy), within each of its pools.
func NewCounts[P Seated](own Room, waiting int, waitlist bool, policy WaitlistPolicy, pools []P) Counts {
	c := Counts{Capacity: own.Capacity, Taken: own.Taken, Reserved: own.Reserved, Waiting: waiting, Waitlist: waitlist,
		Fill: policy == PolicyFill}
	for _, p := range pools {
		c = c.Within(p.SeatRoom())
	}
	return c
}

// Room returns the activity's own room.
func (c Counts) Room() Room { return Room{Capacity: c.Capacity, Taken: c.Taken, Reserved: c.Reserved} }

// Free returns the seats a signup could take: the activity's own free
// seats, or fewer when a pool has fewer left (negative when overfull).
func (c Counts) Free() int {
	free := c.Room().Free()
	if c.Pooled {
		free = min(free, c.Shared)
	}
	return free
}

// Remaining is the one "remaining" of the API: what a new signup could get
// now, max(0, min(capacity - taken - reserved, each pool's)).
func (c Counts) Remaining() int { return max(0, c.Free()) }

// Fits reports whether n seats (0 means 1) are free in the activity and
// every one of its pools: the fit that promotion, blocks and Admit ask.
func (c Counts) Fits(n int) bool { return c.Free() >= max(n, 1) }

// CanEverHold reports whether n seats (0 means 1) fit the activity's
// capacity and every one of its pools' capacities: a party larger can
// never be seated, not even from the waiting list. A capacity of 0 holds
// no seats yet (everyone waits, as on a list opened before its seats),
// and refuses no party.
func (c Counts) CanEverHold(n int) bool {
	n = max(n, 1)
	return holds(c.Capacity, n) && (!c.Pooled || holds(c.PoolCapacity, n))
}

// holds reports whether a capacity can ever hold a party of n.
func holds(capacity, n int) bool { return capacity == 0 || n <= capacity }

// Within returns the counts with one more pool, p.
func (c Counts) Within(p Room) Counts {
	if !c.Pooled || p.Free() < c.Shared {
		c.Shared, c.SharedPool = p.Free(), p.Pool
	}
	if !c.Pooled || p.Capacity < c.PoolCapacity {
		c.PoolCapacity, c.SmallestPool = p.Capacity, p.Pool
	}
	c.Pooled = true
	return c
}

// Unreserve returns the counts with n reserved seats counted free, in the
// activity and its pools (a block's own unused seats, to its audience).
func (c Counts) Unreserve(n int) Counts {
	c.Reserved -= n
	if c.Pooled {
		c.Shared += n
	}
	return c
}

// Admission is the admission rule's answer for one signup.
type Admission int

// The answers of Admit.
const (
	// AdmitSeat: the signup takes a seat.
	AdmitSeat Admission = iota + 1
	// AdmitWaitlist: the signup joins the end of the waiting list.
	AdmitWaitlist
	// AdmitFull: the signup is refused (activity_full).
	AdmitFull
)

// String names the answer.
func (a Admission) String() string {
	switch a {
	case AdmitSeat:
		return "seat"
	case AdmitWaitlist:
		return "waitlist"
	case AdmitFull:
		return "full"
	}
	return "unknown"
}

// Admit is the one admission rule: whether a signup gets its seats, a
// place in line or a refusal. A signup for n seats joins the end of the
// line, and the waiting-list policy's promotion decides: under
// PolicyStrict it takes its seats only when n are free (in the activity
// and in each of its pools) and nobody waits
// (the line is served first); under PolicyFill whenever n are free (every
// party that waits asks for more than are free, since each release
// promotes every party that fits). Else it joins the waiting list when the
// activity keeps one; else it is refused as full. It is all or nothing:
// never fewer seats than asked. A signup for more seats than the activity
// or one of its pools can ever hold (CanEverHold) is refused as full,
// waiting list or not: it would hold a strict line forever.
//
// Every admission decision follows it:
//   - Decide, at the authority, for each signup (and for a late payment's
//     re-admission, which takes a seat or nothing);
//   - the Service's full check (confirmFull), on the counts of one
//     read-only snapshot of the authority, before anyone is refused;
//   - the display tier's gate, a Redis script that cannot call Go: its Lua
//     form is written once, beside the reserve script in capacity's
//     scripts.go, on the counter's fields (Taken = taken + held), and a
//     test in the capacity package requires both forms to give the same
//     answers. Change them together. A pooled activity's gate asks its
//     pools' counters too, one script each (they live in other Redis
//     Cluster slots), and the signup is held only when every pool has
//     room: Shared is the least of them.
func Admit(c Counts) Admission {
	switch {
	case !c.CanEverHold(c.Seats):
		return AdmitFull
	case c.Fits(c.Seats) && (c.Waiting == 0 || c.Fill):
		return AdmitSeat
	case c.Waitlist:
		return AdmitWaitlist
	default:
		return AdmitFull
	}
}

// For returns the counts for a signup for seats.
func (c Counts) For(seats int) Counts {
	c.Seats = seats
	return c
}
