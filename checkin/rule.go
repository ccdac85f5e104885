package checkin

import (
	"time"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// Type is what a scan records: an entry or an exit.
type Type string

// Scan types.
const (
	TypeEntry Type = "entry"
	TypeExit  Type = "exit"
)

// Results of an accepted scan.
const (
	ResultEntered = "entered"
	ResultExited  = "exited"
)

// Scan is one scan at a door, the registration already found.
type Scan struct {
	Type   Type
	Device string
	// Force records the scan whatever the rules say (an offline device's
	// upload of a scan it accepted); At is then when it happened.
	Force bool
	At    time.Time
}

// Record is a registration's state on one list.
type Record struct {
	Inside bool
	// InsideSeats is the seats its entry put inside (what its exit takes
	// out again).
	InsideSeats int
	Entries     int
	Exits       int
	// FirstAt and FirstDevice are its first accepted entry's.
	FirstAt     *time.Time
	FirstDevice string
}

// Verdict is what Decide makes of a scan: a refusal, or the record and
// list counts after it, and the rule a forced scan broke.
type Verdict struct {
	// Refusal is the error of a refused scan (nil when it is recorded).
	Refusal error
	// Conflict is the rule a recorded (forced) scan broke, "" for none.
	Conflict string
	Record   Record
	// Inside, CheckedIn and Conflicts are the list's counts after the scan.
	Inside, CheckedIn, Conflicts int
}

// Decide applies a list's rules to a scan of a registration whose record
// on the list is rec, with the list's counts as they stand: validity
// first (the registration holds a seat; its activity is the list's), then
// the list's window, then duplicates (the entry rule; an exit of a
// registration not inside), then the room's limit. A forced scan is
// recorded whatever they say, with the first rule it broke as its
// conflict. reg is the registration as it is now, under the lock of its
// activity; the scan's At is when it happened (the window is checked at
// it).
func Decide(l List, reg registration.Registration, rec Record, s Scan) Verdict {
	v := Verdict{Record: rec, Inside: l.Inside, CheckedIn: l.CheckedIn, Conflicts: l.Conflicts}
	if err := broken(l, reg, rec, s); err != nil {
		if !s.Force {
			v.Refusal = err
			return v
		}
		v.Conflict = capacityd.ErrorCode(err)
		v.Conflicts++
	}
	seats := max(reg.Seats, 1)
	switch s.Type {
	case TypeExit:
		v.Record.Exits++
		if v.Record.Inside {
			v.Record.Inside = false
			v.Inside = max(0, v.Inside-v.Record.InsideSeats)
			v.Record.InsideSeats = 0
		}
	default:
		if v.Record.Entries == 0 {
			v.CheckedIn++
			at := s.At
			v.Record.FirstAt, v.Record.FirstDevice = &at, s.Device
		}
		v.Record.Entries++
		if !v.Record.Inside {
			v.Record.Inside, v.Record.InsideSeats = true, seats
			v.Inside += seats
		}
	}
	return v
}

// broken returns the refusal of the first rule the scan breaks, in the
// documented order, or nil.
func broken(l List, reg registration.Registration, rec Record, s Scan) error {
	if !reg.Status.Occupying() {
		return capacityd.Errorf(capacityd.ETicketRevoked, "registration %s holds no seat (it is %s)", reg.ID, reg.Status)
	}
	if !l.Has(reg.ActivityID) {
		return capacityd.Errorf(capacityd.EWrongList, "registration %s is for activity %s, which is not on check-in list %s",
			reg.ID, reg.ActivityID, l.ID)
	}
	if !l.Open(s.At) {
		return &capacityd.Error{Code: capacityd.ECheckinClosed, Message: "check-in list " + l.ID + " takes no scans at this time"}
	}
	if s.Type == TypeExit {
		if !rec.Inside {
			return capacityd.Errorf(capacityd.ENotInside, "registration %s is not inside through check-in list %s", reg.ID, l.ID)
		}
		return nil
	}
	if again := (l.Entry == EntryOnce && rec.Entries > 0 && !acceptSecondEntries) || (l.Entry == EntryReentry && rec.Inside); again {
		e := capacityd.Errorf(capacityd.EAlreadyCheckedIn, "registration %s already entered through check-in list %s", reg.ID, l.ID)
		if rec.FirstAt != nil {
			e.Previous = &capacityd.PreviousEntry{At: rec.FirstAt.UTC(), Device: rec.FirstDevice, ListID: l.ID}
		}
		return e
	}
	if seats := max(reg.Seats, 1); l.MaxInside != nil && !rec.Inside && l.Inside+seats > *l.MaxInside {
		inside, limit := l.Inside, *l.MaxInside
		e := capacityd.Errorf(capacityd.ERoomFull, "check-in list %s has %d of %d seats inside; %d more would pass its limit",
			l.ID, inside, limit, seats)
		e.Inside, e.MaxInside = &inside, &limit
		return e
	}
	return nil
}
