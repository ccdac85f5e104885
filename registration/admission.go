package registration

// Counts are what the admission rule looks at: an activity's seats and
// waiting list, as the one who asks sees them, and the seats asked for.
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
	// then the fewest seats left in them (the least capacity - taken -
	// reserved over its pools; taken + held for the display tier's gate). A signup must
	// fit the activity and every pool.
	Pooled bool
	Shared int
}

// Free returns the seats a signup could take: the activity's own free
// seats, or fewer when a pool has fewer left (negative when overfull).
func (c Counts) Free() int {
	free := c.Capacity - c.Taken - c.Reserved
	if c.Pooled {
		free = min(free, c.Shared)
	}
	return free
}

// Within returns the counts with one more pool of free seats left.
func (c Counts) Within(free int) Counts {
	if !c.Pooled || free < c.Shared {
		c.Shared = free
	}
	c.Pooled = true
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
// never fewer seats than asked.
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
	case c.Free() >= max(c.Seats, 1) && (c.Waiting == 0 || c.Fill):
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
