package registration

import (
	"strings"
	"unicode/utf8"

	"github.com/physiciansnet/capacityd"
)

// MaxRequestIDLen is the longest request id the service keeps from a
// client: a longer one, or one with other than visible ASCII characters,
// is replaced by one of the service's own.
const MaxRequestIDLen = 64

// ValidRequestID reports whether id is a request id the service keeps: 1 to
// MaxRequestIDLen visible ASCII characters (no space, no control).
func ValidRequestID(id string) bool {
	if id == "" || len(id) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// storable reports whether PostgreSQL stores s as text: valid UTF-8 without
// NUL. Every string a command carries into a change transaction is checked
// before the command joins a batch, so that no command's data can fail the
// transaction it shares with others.
func storable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// validateCaller checks the strings a caller puts on the events of its
// commands.
func validateCaller(c Caller) error {
	if !ValidUserIDLength(c.UserID) {
		return capacityd.Errorf(capacityd.EInvalid, "user id must be 1 to %d characters", MaxUserIDLen)
	}
	if !storable(c.UserID) {
		return capacityd.Errorf(capacityd.EInvalid, "user id must be valid UTF-8 without NUL characters")
	}
	return nil
}
