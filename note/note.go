// Package note counts the views and waters (likes) of the community's notes,
// exactly: every increment is answered only after it is committed in the
// authority, with numbers that include it. Concurrent increments of one note
// are combined into a single upsert (see Service), so a hot note costs one
// statement per batch instead of one per request.
package note

import "github.com/physiciansnet/capacityd"

// MaxIDLen is the longest note id accepted.
const MaxIDLen = 128

// Stats are the counters of one note. A note never seen has zero of both.
type Stats struct {
	NoteID string `json:"note_id"`
	Views  int64  `json:"views"`
	Waters int64  `json:"waters"`
}

// Kind is what one increment adds to: views or waters.
type Kind uint8

// The kinds of increment.
const (
	View Kind = iota + 1
	Water
)

// String returns "view" or "water".
func (k Kind) String() string {
	switch k {
	case View:
		return "view"
	case Water:
		return "water"
	}
	return "unknown"
}

// ValidateID accepts 1 to MaxIDLen characters of [A-Za-z0-9_-] and returns
// an invalid_request error for anything else.
func ValidateID(id string) error {
	if len(id) == 0 || len(id) > MaxIDLen {
		return capacityd.Errorf(capacityd.EInvalid, "note id must be 1 to %d characters of [A-Za-z0-9_-]", MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return capacityd.Errorf(capacityd.EInvalid, "note id must be 1 to %d characters of [A-Za-z0-9_-]", MaxIDLen)
		}
	}
	return nil
}

func idByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '-'
}
