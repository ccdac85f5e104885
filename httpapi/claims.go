package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// timeClaims are the registered claims that hold times, which RFC 7519
// defines as JSON numbers.
var timeClaims = []string{"exp", "nbf", "iat"}

// UnmarshalJSON decodes the claims, refusing a time claim (exp, nbf, iat)
// that is present but not a JSON number: golang-jwt reads "exp":"4102444800"
// as that time, which would let a token's times be strings that other
// verifiers read differently, or not at all. A claim named twice, at any
// depth, is refused too.
func (c *Claims) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if err := noDuplicateKeys(b); err != nil {
		return err // {"roles":[],"roles":["admin"]} means one thing to one reader and another to the next
	}
	for _, name := range timeClaims {
		if v, ok := raw[name]; ok && !isJSONNumber(v) {
			return fmt.Errorf("claim %s must be a JSON number", name)
		}
	}
	type plain Claims // the same fields, without this method
	return json.Unmarshal(b, (*plain)(c))
}

// isJSONNumber reports whether the JSON value v is a number.
func isJSONNumber(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))
}
