package client

import (
	"encoding/json"
	"time"
)

// RegistrationTicket is what a registration's holder shows at the door:
// Ticket is the text of its QR code.
type RegistrationTicket struct {
	RegistrationID string `json:"registration_id"`
	ActivityID     string `json:"activity_id"`
	Seats          int    `json:"seats"`
	// Ticket is a compact JWS (EdDSA) signed with a key of CheckinKeys.
	Ticket string `json:"ticket"`
}

// CheckinKey is a public key that signs tickets, as a JWK (Kty "OKP",
// Crv "Ed25519", Alg "EdDSA", Use "sig"; X is the key in base64url).
type CheckinKey struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid"`
	X   string `json:"x"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// CheckinKeySet is the JWK Set of CheckinKeys.
type CheckinKeySet struct {
	Keys []CheckinKey `json:"keys"`
}

// Entry rules of a check-in list: whether a registration may enter again.
const (
	// EntryOnce: one entry; a second is refused, even after an exit.
	EntryOnce = "once"
	// EntryReentry: again after an exit; not while inside.
	EntryReentry = "reentry"
	// EntryMultiple: any number of entries.
	EntryMultiple = "multiple"
)

// Scan types of a check-in.
const (
	ScanEntry = "entry"
	ScanExit  = "exit"
)

// CheckinList is a door: the activities whose tickets it admits, its
// entry rule, room limit and window, the token roles of its devices, and
// its counts.
type CheckinList struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	ActivityIDs []string `json:"activity_ids"`
	// Entry is EntryOnce, EntryReentry or EntryMultiple.
	Entry string `json:"entry"`
	// MaxInside is the most seats inside at once; nil: no limit.
	MaxInside *int `json:"max_inside"`
	// OpensAt and ClosesAt bound when scans are taken (nil: no bound).
	OpensAt  *time.Time `json:"opens_at"`
	ClosesAt *time.Time `json:"closes_at"`
	// DoorRoles are the token roles of its devices.
	DoorRoles []string `json:"door_roles"`
	// CheckedIn counts the registrations that entered through it, Inside
	// the seats inside now, Conflicts the forced check-ins that broke a
	// rule.
	CheckedIn int       `json:"checked_in"`
	Inside    int       `json:"inside"`
	Conflicts int       `json:"conflicts"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// NewCheckinList is what CreateCheckinList sends: Name and ActivityIDs,
// the rest optional (Entry "": once; nil and empty: none).
type NewCheckinList struct {
	Name        string     `json:"name"`
	ActivityIDs []string   `json:"activity_ids"`
	Entry       string     `json:"entry,omitempty"`
	MaxInside   *int       `json:"max_inside,omitempty"`
	OpensAt     *time.Time `json:"opens_at,omitempty"`
	ClosesAt    *time.Time `json:"closes_at,omitempty"`
	DoorRoles   []string   `json:"door_roles,omitempty"`
}

// CheckinListPatch is what UpdateCheckinList sends: the fields that are
// set. ActivityIDs and DoorRoles replace the lists (a pointer to an empty
// DoorRoles leaves the list to admins); the Clear fields remove the limit
// and the window's bounds (sent as null).
type CheckinListPatch struct {
	Name                                        *string    `json:"name,omitempty"`
	ActivityIDs                                 *[]string  `json:"activity_ids,omitempty"`
	Entry                                       *string    `json:"entry,omitempty"`
	MaxInside                                   *int       `json:"max_inside,omitempty"`
	OpensAt                                     *time.Time `json:"opens_at,omitempty"`
	ClosesAt                                    *time.Time `json:"closes_at,omitempty"`
	DoorRoles                                   *[]string  `json:"door_roles,omitempty"`
	ClearMaxInside, ClearOpensAt, ClearClosesAt bool       `json:"-"`
}

// MarshalJSON encodes the patch with max_inside, opens_at and closes_at
// null when their Clear field is set.
func (p CheckinListPatch) MarshalJSON() ([]byte, error) {
	type fields CheckinListPatch // without the method
	body := struct {
		fields
		MaxInside any `json:"max_inside,omitempty"`
		OpensAt   any `json:"opens_at,omitempty"`
		ClosesAt  any `json:"closes_at,omitempty"`
	}{fields: fields(p)}
	body.MaxInside, body.OpensAt, body.ClosesAt = orNull(p.MaxInside, p.ClearMaxInside), orNull(p.OpensAt, p.ClearOpensAt), orNull(p.ClosesAt, p.ClearClosesAt)
	return json.Marshal(body)
}

// CheckinListPage is one page of ListCheckinLists.
type CheckinListPage = Page[CheckinList]

// RedeemRequest is one scan at a check-in list: Device, and exactly one
// of Ticket and RegistrationID.
type RedeemRequest struct {
	// Ticket is the scanned ticket (RegistrationTicket.Ticket).
	Ticket string `json:"ticket,omitempty"`
	// RegistrationID is the registration, for someone found by name.
	RegistrationID string `json:"registration_id,omitempty"`
	// Type is ScanEntry or ScanExit; "" sends none (an entry).
	Type string `json:"type,omitempty"`
	// Device names the scanning device (1–64 printable characters).
	Device string `json:"device"`
	// Force records the scan whatever the rules say (an offline device's
	// upload of a scan it accepted); At is then when it happened (at most
	// 7 days ago; nil: now).
	Force bool       `json:"force,omitempty"`
	At    *time.Time `json:"at,omitempty"`
}

// CheckIn is one recorded scan at a check-in list.
type CheckIn struct {
	ID string `json:"id"`
	// Seq numbers the list's check-ins 1, 2, 3, … without gaps.
	Seq            int64  `json:"seq"`
	ListID         string `json:"list_id"`
	RegistrationID string `json:"registration_id"`
	ActivityID     string `json:"activity_id"`
	UserID         string `json:"user_id"`
	Seats          int    `json:"seats"`
	// Type is ScanEntry or ScanExit.
	Type   string    `json:"type"`
	At     time.Time `json:"at"`
	Device string    `json:"device"`
	Forced bool      `json:"forced"`
	// Conflict is the code a forced scan would have been refused with
	// (Code* constants); nil when it broke no rule.
	Conflict *string `json:"conflict"`
}

// CheckinResult is the outcome of a scan (Redeem) or a walk-in (WalkIn):
// Result "entered", "exited" or, for a walk-in put on the waiting list,
// "waitlisted" (then Checkin is nil).
type CheckinResult struct {
	Result       string       `json:"result"`
	Registration Registration `json:"registration"`
	Checkin      *CheckIn     `json:"checkin"`
	// Inside is the list's seats inside after it; MaxInside its limit
	// (nil: none).
	Inside    int  `json:"inside"`
	MaxInside *int `json:"max_inside"`
	// Replayed is set by Redeem: the answer is the stored outcome of an
	// earlier request with the same idempotency key.
	Replayed bool `json:"-"`
}

// CheckinFeed is one answer of Checkins: pass NextAfter as after next
// time.
type CheckinFeed struct {
	Items     []CheckIn `json:"items"`
	NextAfter int64     `json:"next_after"`
}

// TicketSyncItem is what a door device needs to know of one registration
// to decide offline.
type TicketSyncItem struct {
	RegistrationID string `json:"registration_id"`
	ActivityID     string `json:"activity_id"`
	UserID         string `json:"user_id"`
	Seats          int    `json:"seats"`
	// Valid is whether it holds a seat now; Inside whether it is inside
	// through the list; Entries its entries through the list.
	Valid   bool `json:"valid"`
	Inside  bool `json:"inside"`
	Entries int  `json:"entries"`
}

// TicketSyncPage is one answer of TicketSync: pass NextCursor (always
// set) as the cursor of the next call.
type TicketSyncPage struct {
	Items      []TicketSyncItem `json:"items"`
	NextCursor string           `json:"next_cursor"`
}

// NewWalkIn is what WalkIn sends: ActivityID and UserID; Seats 0 sends
// none (one seat), Device "" none ("walk-in").
type NewWalkIn struct {
	ActivityID string `json:"activity_id"`
	UserID     string `json:"user_id"`
	Seats      int    `json:"seats,omitempty"`
	Device     string `json:"device,omitempty"`
}

// CheckinCounts are a check-in list's counts, as its stream sends them.
type CheckinCounts struct {
	ListID    string `json:"list_id"`
	CheckedIn int    `json:"checked_in"`
	Inside    int    `json:"inside"`
	MaxInside *int   `json:"max_inside"`
	Conflicts int    `json:"conflicts"`
}
