// Package attendance reads what the doors recorded: each registration's
// time inside an activity (from the check-ins of every list that includes
// it), whether that attendance is eligible for credit, an activity's
// no-show summary, signed attendance statements, and a series' show rate
// with the capacity it suggests for a room. Everything here but Service is
// a pure computation.
package attendance

import (
	"math"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

// Activity is what attendance needs of an activity: its id and schedule.
type Activity struct {
	ID string
	// StartsAt and EndsAt are when it takes place (nil: not set);
	// AttendancePercent the share of that time inside that makes
	// attendance eligible (nil: any entry).
	StartsAt, EndsAt  *time.Time
	AttendancePercent *int
}

// Timed reports whether the activity has both a start and an end, so that
// time inside can be measured.
func (a Activity) Timed() bool { return a.StartsAt != nil && a.EndsAt != nil }

// Ended reports whether the activity has a start and an end and the end
// has come at now.
func (a Activity) Ended(now time.Time) bool { return a.Timed() && !now.Before(*a.EndsAt) }

// Row is a registration with its check-ins, as the store reads it.
type Row struct {
	// Seq is the registration's internal id: rows are in its order.
	Seq            int64
	RegistrationID string
	UserID         string
	Seats          int
	Status         registration.Status
	Checks         []Check
}

// Item is one registration's attendance.
type Item struct {
	RegistrationID string              `json:"registration_id"`
	UserID         string              `json:"user_id"`
	Seats          int                 `json:"seats"`
	Status         registration.Status `json:"status"`
	// CheckedIn is true once any list recorded an entry of it (forced or
	// not).
	CheckedIn bool `json:"checked_in"`
	// FirstEntryAt is its earliest entry on any list.
	FirstEntryAt *time.Time `json:"first_entry_at"`
	// Seconds and Percent are its time inside the activity and that
	// time's share of the activity's; nil while the activity has no start
	// or no end.
	Seconds *int64   `json:"seconds"`
	Percent *float64 `json:"percent"`
	// Eligible: Percent reaches the activity's attendance_percent when it
	// has one (and Percent is known); otherwise CheckedIn.
	Eligible bool `json:"eligible"`
}

// Evaluate returns a row's attendance of the activity a.
func Evaluate(a Activity, r Row) Item {
	it := Item{RegistrationID: r.RegistrationID, UserID: r.UserID, Seats: r.Seats, Status: r.Status,
		FirstEntryAt: FirstEntry(r.Checks)}
	it.CheckedIn = it.FirstEntryAt != nil
	it.Eligible = it.CheckedIn
	if !a.Timed() {
		return it
	}
	secs := Seconds(r.Checks, *a.StartsAt, *a.EndsAt)
	pct := Percent(secs, a.EndsAt.Sub(*a.StartsAt))
	it.Seconds, it.Percent = &secs, &pct
	if a.AttendancePercent != nil {
		// The percent as shown decides, so that an answer never shows a
		// percent that reaches the threshold next to eligible false.
		it.Eligible = pct >= float64(*a.AttendancePercent)
	}
	return it
}

// Percent returns seconds as a percentage of length, rounded to one
// decimal (0 for a length that is not positive).
func Percent(seconds int64, length time.Duration) float64 {
	if length <= 0 {
		return 0
	}
	return round(100*float64(seconds)/length.Seconds(), 1)
}

// round rounds x to digits decimals, halves away from zero.
func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// Counts are how many of an activity's registrations that hold a seat
// there are, and how many of them have an entry.
type Counts struct {
	Registered int
	CheckedIn  int
}

// Summary is an activity's attendance in numbers.
type Summary struct {
	// Registered counts the registrations that hold a seat (pending,
	// awaiting_payment, approved), CheckedIn those of them with an entry
	// on any list, NoShow the others.
	Registered int `json:"registered"`
	CheckedIn  int `json:"checked_in"`
	NoShow     int `json:"no_show"`
	// NoShowRate is NoShow / Registered rounded to 3 decimals (0 when
	// nobody is registered).
	NoShowRate float64 `json:"no_show_rate"`
}

// Summarize returns the summary of counts.
func Summarize(c Counts) Summary {
	s := Summary{Registered: c.Registered, CheckedIn: c.CheckedIn, NoShow: c.Registered - c.CheckedIn}
	if c.Registered > 0 {
		s.NoShowRate = round(float64(s.NoShow)/float64(c.Registered), 3)
	}
	return s
}

// Sheet is one page of an activity's attendance.
type Sheet struct {
	Summary    Summary `json:"summary"`
	Items      []Item  `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// Personal is one registration's attendance with its signed statement.
type Personal struct {
	Item
	// Statement is a compact JWS of StatementClaims, signed with the
	// check-in keys, once the activity has ended; nil before its end or
	// when it has no start or end.
	Statement *string `json:"statement"`
}
