package httpapi

import (
	"bytes"
	"encoding/json"

	"github.com/physiciansnet/capacityd"
)

// noDuplicateKeys refuses a JSON value b in which an object, at any depth,
// names a key twice ("\u0061" and "a" are the same key). encoding/json
// keeps the last of them and PostgreSQL's jsonb does too, while another
// reader of the same body (a proxy, a log, an audit trail) may keep the
// first: {"capacity":5,"capacity":1000000} must not mean 5 to one and a
// million to another. Metadata, stored as sent, is held to the same rule.
// b must already have decoded without error: it is valid JSON nested at
// most as deep as encoding/json allows.
func noDuplicateKeys(b []byte) error {
	return uniqueKeys(json.NewDecoder(bytes.NewReader(b)))
}

// uniqueKeys reads one value from dec and refuses a duplicate key in it.
func uniqueKeys(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return nil // cannot happen for b that decoded
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil
			}
			key, _ := tok.(string)
			if seen[key] {
				return capacityd.Errorf(capacityd.EInvalid, "duplicate key %q in the request body", safeForMessage(key))
			}
			seen[key] = true
			if err := uniqueKeys(dec); err != nil {
				return err
			}
		}
		_, _ = dec.Token() // }
	case json.Delim('['):
		for dec.More() {
			if err := uniqueKeys(dec); err != nil {
				return err
			}
		}
		_, _ = dec.Token() // ]
	}
	return nil
}
