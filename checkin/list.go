// Package checkin is the door: check-in lists, the rule that decides a
// scan, tickets signed with Ed25519 and the sync feed of offline devices.
// Its rule is a pure function (Decide); the store runs it in the list's
// transaction, under the list's lock and the lock of the ticket's
// activity, so that a check-in is exact across doors, devices and
// instances, and against the activity's cancellations.
package checkin

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// Entry is a list's rule for entering more than once.
type Entry string

// Entry rules.
const (
	// EntryOnce accepts one entry per registration; an exit is recorded
	// and does not allow a second entry.
	EntryOnce Entry = "once"
	// EntryReentry accepts an entry again after an exit.
	EntryReentry Entry = "reentry"
	// EntryMultiple accepts every entry; no exit is needed.
	EntryMultiple Entry = "multiple"
)

// Limits of a list's fields.
const (
	MaxNameLen       = 200
	MaxActivities    = 50
	MaxMaxInside     = 1_000_000
	MaxDoorRoles     = 10
	MaxRoleLen       = 64
	MaxDeviceLen     = 64
	DefaultListLimit = 100
	MaxListLimit     = 500
)

// List is a check-in list: a door, and the counts kept under its lock.
type List struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	ActivityIDs []string   `json:"activity_ids"`
	Entry       Entry      `json:"entry"`
	MaxInside   *int       `json:"max_inside"`
	OpensAt     *time.Time `json:"opens_at"`
	ClosesAt    *time.Time `json:"closes_at"`
	DoorRoles   []string   `json:"door_roles"`
	// CheckedIn counts the registrations with an accepted entry, Inside
	// the seats inside now, Conflicts the forced check-ins that broke a
	// rule.
	CheckedIn int       `json:"checked_in"`
	Inside    int       `json:"inside"`
	Conflicts int       `json:"conflicts"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	// LastSeq is the seq of the list's last check-in.
	LastSeq int64 `json:"-"`
	// Seq orders lists by creation for keyset pages.
	Seq int64 `json:"-"`
}

// Has reports whether activityID is one of the list's activities.
func (l List) Has(activityID string) bool { return slices.Contains(l.ActivityIDs, activityID) }

// Open reports whether the list takes scans at at.
func (l List) Open(at time.Time) bool {
	return (l.OpensAt == nil || !at.Before(*l.OpensAt)) && (l.ClosesAt == nil || at.Before(*l.ClosesAt))
}

// DoorOf reports whether a caller with roles is door staff of the list.
func (l List) DoorOf(roles []string) bool {
	for _, r := range roles {
		if slices.Contains(l.DoorRoles, r) {
			return true
		}
	}
	return false
}

// Counts is what a list's stream shows.
type Counts struct {
	ListID    string `json:"list_id"`
	CheckedIn int    `json:"checked_in"`
	Inside    int    `json:"inside"`
	MaxInside *int   `json:"max_inside"`
	Conflicts int    `json:"conflicts"`
}

// Counts returns the list's counts.
func (l List) Counts() Counts {
	return Counts{ListID: l.ID, CheckedIn: l.CheckedIn, Inside: l.Inside, MaxInside: l.MaxInside, Conflicts: l.Conflicts}
}

// NewList is an admin's request for a list.
type NewList struct {
	Name        string
	ActivityIDs []string
	Entry       Entry
	MaxInside   *int
	OpensAt     *time.Time
	ClosesAt    *time.Time
	DoorRoles   []string
}

// Validate checks the request and fills the defaults.
func (n *NewList) Validate() error {
	if n.Entry == "" {
		n.Entry = EntryOnce
	}
	if n.DoorRoles == nil {
		n.DoorRoles = []string{}
	}
	return validateList(&n.Name, &n.ActivityIDs, &n.Entry, n.MaxInside, n.OpensAt, n.ClosesAt, &n.DoorRoles)
}

// ListPatch changes some of a list's fields.
type ListPatch struct {
	Name        *string
	ActivityIDs *[]string
	Entry       *Entry
	MaxInside   registration.Optional[int]
	OpensAt     registration.Optional[time.Time]
	ClosesAt    registration.Optional[time.Time]
	DoorRoles   *[]string
}

// Empty reports whether the patch changes nothing.
func (p ListPatch) Empty() bool {
	return p.Name == nil && p.ActivityIDs == nil && p.Entry == nil && !p.MaxInside.Set && !p.OpensAt.Set && !p.ClosesAt.Set &&
		p.DoorRoles == nil
}

// Apply returns l with the patch applied, validated.
func (p ListPatch) Apply(l List, now time.Time) (List, error) {
	if p.Name != nil {
		l.Name = *p.Name
	}
	if p.ActivityIDs != nil {
		l.ActivityIDs = slices.Clone(*p.ActivityIDs)
	}
	if p.Entry != nil {
		l.Entry = *p.Entry
	}
	if p.MaxInside.Set {
		l.MaxInside = p.MaxInside.Value
	}
	if p.OpensAt.Set {
		l.OpensAt = p.OpensAt.Value
	}
	if p.ClosesAt.Set {
		l.ClosesAt = p.ClosesAt.Value
	}
	if p.DoorRoles != nil {
		l.DoorRoles = slices.Clone(*p.DoorRoles)
	}
	if err := validateList(&l.Name, &l.ActivityIDs, &l.Entry, l.MaxInside, l.OpensAt, l.ClosesAt, &l.DoorRoles); err != nil {
		return List{}, err
	}
	l.UpdatedAt = now
	return l, nil
}

func validateList(name *string, acts *[]string, entry *Entry, maxInside *int, opensAt, closesAt *time.Time, roles *[]string) error {
	if n := utf8.RuneCountInString(*name); n < 1 || n > MaxNameLen || !utf8.ValidString(*name) || strings.ContainsRune(*name, 0) {
		return capacityd.Errorf(capacityd.EInvalid, "name must be 1 to %d characters", MaxNameLen)
	}
	if len(*acts) < 1 || len(*acts) > MaxActivities {
		return capacityd.Errorf(capacityd.EInvalid, "activity_ids must name 1 to %d activities", MaxActivities)
	}
	seen := make(map[string]bool, len(*acts))
	for _, id := range *acts {
		if seen[id] {
			return capacityd.Errorf(capacityd.EInvalid, "activity_ids names %s twice", safe(id))
		}
		seen[id] = true
	}
	switch *entry {
	case EntryOnce, EntryReentry, EntryMultiple:
	default:
		return capacityd.Errorf(capacityd.EInvalid, `entry must be "once", "reentry" or "multiple"`)
	}
	if maxInside != nil && (*maxInside < 1 || *maxInside > MaxMaxInside) {
		return capacityd.Errorf(capacityd.EInvalid, "max_inside must be between 1 and %d, or null", MaxMaxInside)
	}
	if opensAt != nil && closesAt != nil && !closesAt.After(*opensAt) {
		return capacityd.Errorf(capacityd.EInvalid, "closes_at must be after opens_at")
	}
	if len(*roles) > MaxDoorRoles {
		return capacityd.Errorf(capacityd.EInvalid, "door_roles must name at most %d roles", MaxDoorRoles)
	}
	for _, r := range *roles {
		if !printable(r, MaxRoleLen) {
			return capacityd.Errorf(capacityd.EInvalid, "a door role must be 1 to %d printable ASCII characters without spaces", MaxRoleLen)
		}
	}
	return nil
}

// printable reports whether s is 1 to max printable ASCII characters
// without spaces.
func printable(s string, max int) bool {
	if len(s) < 1 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// safe shortens a client's value for a message.
func safe(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// ListNotFound is the refusal of a list id that names none.
func ListNotFound(id string) error {
	return capacityd.Errorf(capacityd.ENotFound, "check-in list %s not found", safe(id))
}

// ListPage is one page of lists, newest first.
type ListPage struct {
	Items      []List  `json:"items"`
	NextCursor *string `json:"next_cursor"`
}
