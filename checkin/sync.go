package checkin

import (
	"encoding/base64"
	"encoding/json"

	"github.com/physiciansnet/capacityd"
)

// Limits of the ticket sync feed.
const (
	DefaultSyncLimit = 500
	MaxSyncLimit     = 1000
)

// TicketState is what a door device keeps of one registration offline:
// nothing personal beyond the user id, no metadata.
type TicketState struct {
	RegistrationID string `json:"registration_id"`
	ActivityID     string `json:"activity_id"`
	UserID         string `json:"user_id"`
	Seats          int    `json:"seats"`
	// Valid is true while the registration holds a seat.
	Valid bool `json:"valid"`
	// Inside and Entries are its record on the list.
	Inside  bool `json:"inside"`
	Entries int  `json:"entries"`
}

// SyncPage is one page of the ticket sync feed.
type SyncPage struct {
	Items      []TicketState `json:"items"`
	NextCursor string        `json:"next_cursor"`
}

// SyncCursor is a position in a list's ticket sync feed: the last seq of
// each of the list's activities that the device has seen (their events
// commit in seq order under each activity's lock, so that nothing that
// commits later is skipped), and, during the first sync, the last
// registration it was sent.
type SyncCursor struct {
	// Seqs maps an activity's internal id to its last seq seen; an
	// activity missing from it (one added to the list since) is read from
	// its first event.
	Seqs map[int64]int64 `json:"s"`
	// After is the internal id of the last registration of the first
	// sync sent; Full is true while the first sync goes on.
	After int64 `json:"r,omitempty"`
	Full  bool  `json:"f,omitempty"`
	// AfterActivity and AfterStatus place After in the first sync's
	// order: by activity, status and id.
	AfterActivity int64  `json:"a,omitempty"`
	AfterStatus   string `json:"t,omitempty"`
}

// Encode returns the cursor as the opaque string clients send back.
func (c SyncCursor) Encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeSyncCursor parses a cursor the feed gave.
func DecodeSyncCursor(s string) (SyncCursor, error) {
	var c SyncCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 8192 || json.Unmarshal(b, &c) != nil || c.Seqs == nil || c.After < 0 {
		return SyncCursor{}, capacityd.Errorf(capacityd.EInvalid, "cursor is malformed: use a next_cursor the feed gave")
	}
	for _, seq := range c.Seqs {
		if seq < 0 {
			return SyncCursor{}, capacityd.Errorf(capacityd.EInvalid, "cursor is malformed: use a next_cursor the feed gave")
		}
	}
	return c, nil
}
