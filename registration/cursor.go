package registration

import (
	"encoding/base64"
	"regexp"

	"github.com/physiciansnet/capacityd"
)

// Cursors name the last item of a page by its public id, base64url
// encoded: they carry nothing the page itself does not show (no internal
// row number, which would tell how many rows the whole service holds),
// and clients are to treat them as opaque. The store finds the item's
// row through the public id's unique index and reads the next page by
// keyset on the row as before.

// Cursor id prefixes: the public id prefix of the items of a listing.
const (
	ActivityCursor     = "a_"
	RegistrationCursor = "r_"
	PoolCursor         = "p_"
	SeriesCursor       = "s_"
)

// cursorIDPattern matches the public ids of activities, registrations,
// pools and series: a one-letter prefix and a ULID.
var cursorIDPattern = regexp.MustCompile(`^[arps]_[0-9A-HJKMNP-TV-Z]{26}$`)

// maxCursorLen is the longest well-formed cursor: a 28-byte id encoded.
var maxCursorLen = base64.RawURLEncoding.EncodedLen(28)

// EncodeCursor returns the opaque cursor of the page after the item with
// public id id.
func EncodeCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(id))
}

// DecodeCursor returns the public id a cursor made by EncodeCursor names,
// which must start with prefix (ActivityCursor, RegistrationCursor,
// PoolCursor or SeriesCursor), or invalid_request. Whether the id names an item of the
// listing is the store's to say.
func DecodeCursor(s, prefix string) (string, error) {
	if len(s) > maxCursorLen {
		return "", malformedCursor()
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || !cursorIDPattern.Match(b) || string(b[:2]) != prefix {
		return "", malformedCursor()
	}
	return string(b), nil
}

func malformedCursor() error {
	return capacityd.Errorf(capacityd.EInvalid, "malformed cursor")
}

// UnknownCursor is the error of a well-formed cursor that names no item of
// the listing it is used with: another listing's, or made up.
func UnknownCursor() error {
	return capacityd.Errorf(capacityd.EInvalid, "cursor names no item of this listing: use the next_cursor of a page of it")
}
