package httpapi

import (
	"bytes"
	"encoding/json"
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
// mark (U+FEFF). b must already have decoded without error.
func textOnly(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	if tok != json.Delim('{') {
		return textValue(dec, tok, "")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		if key == metadataField {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		if tok, err = dec.Token(); err != nil {
			return nil
		}
		if err := textValue(dec, tok, key); err != nil {
			return err
		}
	}
	return nil
}

// textValue checks the value that starts with tok, read from dec, of the
// field named field.
func textValue(dec *json.Decoder, tok json.Token, field string) error {
	switch v := tok.(type) {
	case string:
		if !plainText(v) {
			return capacityd.Errorf(capacityd.EInvalid, "field %q must be text without control, bidirectional control or byte order mark characters", safeForMessage(field))
		}
	case json.Delim:
		if v != '{' && v != '[' {
			return nil
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil
			}
			if v == '{' { // tok is a key; the value follows
				if tok, err = dec.Token(); err != nil {
					return nil
				}
			}
			if err := textValue(dec, tok, field); err != nil {
				return err
			}
		}
		_, _ = dec.Token() // the closing delimiter
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
