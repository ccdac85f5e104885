package registration

// BlockedLine is the head of a strict line that no capacity of the
// activity can hold now.
type BlockedLine struct {
	RegistrationID string `json:"registration_id"`
	Seats          int    `json:"seats"`
}

// blockedBy returns the line's head as a BlockedLine when the activity's
// policy is strict and counts can never hold it, else nil.
func blockedBy(policy WaitlistPolicy, c Counts, headID string, headSeats int) *BlockedLine {
	if policy != PolicyStrict || headID == "" || c.CanEverHold(headSeats) {
		return nil
	}
	return &BlockedLine{RegistrationID: headID, Seats: headSeats}
}

// BlockedBy returns the activity's strict line's head when no capacity of
// the activity can hold it (see Activity.LineBlockedBy), from the head's
// id and seats ("" for an empty line) and the activity's counts.
func BlockedBy(a Activity, pools []Room, headID string, headSeats int) *BlockedLine {
	return blockedBy(a.Policy, NewCounts(a.SeatRoom(), a.Waiting, a.Waitlist, a.Policy, pools), headID, headSeats)
}
