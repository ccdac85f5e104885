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
	return walkBody(json.NewDecoder(bytes.NewReader(b)), false, "", false, nil)
}

// walkBody reads one value from dec and refuses a duplicate key in it
// and, where text is set, a string that is not plain text (see textOnly):
// the one pass over a body that both rules take. top says the value is
// the body itself, whose metadata field holds the client's own strings;
// field names the top-level field the value belongs to, for messages.
func walkBody(dec *json.Decoder, text bool, field string, top bool, keys *[]string) error {
	tok, err := dec.Token()
	if err != nil {
		return nil // cannot happen for b that decoded
	}
	switch tok := tok.(type) {
	case string:
		if text && !plainText(tok) {
			return capacityd.Errorf(capacityd.EInvalid, "field %q must be text without control, bidirectional control or byte order mark characters", safeForMessage(field))
		}
	case json.Delim:
		switch tok {
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				t, err := dec.Token()
				if err != nil {
					return nil
				}
				key, _ := t.(string)
				if seen[key] {
					return capacityd.Errorf(capacityd.EInvalid, "duplicate key %q in the request body", safeForMessage(key))
				}
				seen[key] = true
				f := field
				if top {
					f = key
					if keys != nil {
						*keys = append(*keys, key)
					}
				}
				if err := walkBody(dec, text && !(top && key == metadataField), f, false, nil); err != nil {
					return err
				}
			}
			_, _ = dec.Token() // }
		case '[':
			for dec.More() {
				if err := walkBody(dec, text, field, false, nil); err != nil {
					return err
				}
			}
			_, _ = dec.Token() // ]
		}
	}
	return nil
}
