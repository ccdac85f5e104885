package registration

import "time"

// Sources of a Seats reading.
const (
	SourceCache    = "cache"
	SourceDatabase = "database"
)

// Seats is the live seat display of an activity: what the seats read, the
// seat stream and the widget show. The display tier (package capacity)
// serves it, from its counter or from the authority, and says which in
// Source.
type Seats struct {
	ActivityID string `json:"activity_id"`
	Capacity   int    `json:"capacity"`
	Taken      int    `json:"taken"`
	Remaining  int    `json:"remaining"`
	Waiting    int    `json:"waiting"`
	// Reserved is the unused seats of the activity's blocks (shown on the
	// activity, not in the seat display).
	Reserved int       `json:"-"`
	Source   string    `json:"source"`
	AsOf     time.Time `json:"as_of"`
}
