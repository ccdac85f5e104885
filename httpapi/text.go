package httpapi

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/physiciansnet/capacityd"
)

// metadataField is the one field of a body whose strings are the client's
// own data, stored and returned as sent: the rules of text fields (see
// textOnly) do not apply inside it.
const metadataField = "metadata"

// validBody refuses a request body that is not valid UTF-8 or that has a
// \u escape of half a surrogate pair without the other: encoding/json
// would turn either, silently, into U+FFFD. b must already have decoded
// without error.
func validBody(b []byte) error {
	if !utf8.Valid(b) {
		return capacityd.Errorf(capacityd.EInvalid, "request body must be valid UTF-8")
	}
	if !pairedSurrogates(b) {
		return capacityd.Errorf(capacityd.EInvalid, `request body has a \u escape of half a surrogate pair without the other half`)
	}
	return nil
}

// textOnly refuses a string of the JSON value b (titles, names, codes,
// URLs: every string outside the metadata field of an object at the top)
// that holds a control character (NUL, tabs, line breaks, C1 controls), a
// bidirectional control (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066
// to U+2069), which makes one text display as another, or a byte order
// mark (U+FEFF); and, as noDuplicateKeys, a key named twice, in the same
// pass. It returns the keys of b's object (none when b is not an
// object). b must already have decoded without error.
func textOnly(b []byte) ([]string, error) {
	if keys, ok := flatPrintableKeys(b); ok {
		return keys, noKeyTwice(keys)
	}
	var keys []string
	err := walkBody(json.NewDecoder(bytes.NewReader(b)), true, "", true, &keys)
	return keys, err
}

// flatPrintableKeys returns the keys of b when b, a valid JSON text, is
// an object of printable ASCII without a backslash whose values are all
// strings, numbers, true, false or null: most bodies with fields, a door
// scan's among them. No string of such a body can hold a character the
// text rule refuses, so a key named twice is all that remains to look
// for, and the keys are found without a decoder.
func flatPrintableKeys(b []byte) ([]string, bool) {
	for _, c := range b {
		if c == '\\' || c > '~' || (c < ' ' && c != '\t' && c != '\n' && c != '\r') {
			return nil, false
		}
	}
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' {
		return nil, false
	}
	keys := make([]string, 0, 4)
	key := true // a string after { or , is a key
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '"':
			end := bytes.IndexByte(b[i+1:], '"') // no escapes: the next quote ends it
			if end < 0 {
				return nil, false
			}
			if key {
				keys = append(keys, string(b[i+1:i+1+end]))
				key = false
			}
			i += end + 1
		case ',':
			key = true
		case '{', '[':
			return nil, false
		}
	}
	return keys, true
}

// noKeyTwice refuses keys that name one key twice.
func noKeyTwice(keys []string) error {
	for i, k := range keys {
		if slices.Contains(keys[:i], k) {
			return capacityd.Errorf(capacityd.EInvalid, "duplicate key %q in the request body", safeForMessage(k))
		}
	}
	return nil
}

// plainText reports whether s holds no control, bidirectional control or
// byte order mark character.
func plainText(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) || bidiControl(r) || r == '\uFEFF' {
			return false
		}
	}
	return true
}

// bidiControl reports whether r is one of Unicode's bidirectional
// formatting characters.
func bidiControl(r rune) bool {
	return r == '\u061C' || r == '\u200E' || r == '\u200F' || (r >= '\u202A' && r <= '\u202E') || (r >= '\u2066' && r <= '\u2069')
}

// pairedSurrogates reports whether every \uD800–\uDFFF escape in b, a
// valid JSON text, is one half of a surrogate pair: high then low. A lone
// half stands for no character.
func pairedSurrogates(b []byte) bool {
	// In valid JSON a backslash only ever starts an escape inside a
	// string, and \u is always followed by four hex digits.
	escaped := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := escaped(i)
		switch {
		case !ok:
			i++ // a two-character escape such as \\ or \"
		case r >= 0xDC00 && r <= 0xDFFF:
			return false
		case r >= 0xD800 && r <= 0xDBFF:
			low, ok := escaped(i + 6)
			if !ok || low < 0xDC00 || low > 0xDFFF {
				return false
			}
			i += 11
		default:
			i += 5
		}
	}
	return true
}
