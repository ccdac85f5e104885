package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// timeClaims are the registered claims that hold times, which RFC 7519
// defines as JSON numbers.
var timeClaims = []string{"exp", "nbf", "iat"}

// UnmarshalJSON decodes the claims, refusing a time claim (exp, nbf, iat)
// that is present but not a JSON number: golang-jwt reads "exp":"4102444800"
// as that time, which would let a token's times be strings that other
// verifiers read differently, or not at all. A claim named twice, at any
// depth, is refused too, and so is a payload that is not an object.
//
// Every token that is not in the verified-token cache comes through here,
// so the claims are decoded once and then walked once for both rules
// (claimsRules); only a payload with a key written with an escape, or not
// valid UTF-8, takes the slower walk of encoding/json's tokens, which
// decodes keys before it compares them.
func (c *Claims) UnmarshalJSON(b []byte) error {
	type plain Claims // the same fields, without this method
	if err := json.Unmarshal(b, (*plain)(c)); err != nil {
		return err
	}
	err := claimsRules(b)
	if errors.Is(err, errEscapedKey) {
		return claimsRulesUnescaped(b)
	}
	return err
}

// claimsRulesUnescaped applies the rules of UnmarshalJSON to any valid JSON
// b, decoding keys first: what claimsRules does not decide.
func claimsRulesUnescaped(b []byte) error {
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
	return nil
}

// isJSONNumber reports whether the JSON value v is a number.
func isJSONNumber(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))
}

// errEscapedKey is claimsRules giving up on a key written with an escape,
// or not valid UTF-8 (encoding/json reads each invalid byte as U+FFFD),
// which only a decoding reader can compare.
var errEscapedKey = errors.New("escaped key")

// claimsRules walks b, valid JSON, once: it must be an object, no object
// in it may name a key twice, and a time claim at its top must be a
// number. Keys are compared as written; a key with an escape in it, or
// not valid UTF-8, gives errEscapedKey.
func claimsRules(b []byte) error {
	w := jsonWalk{b: b}
	w.space()
	if w.i >= len(b) || b[w.i] != '{' {
		return errors.New("claims must be a JSON object")
	}
	return w.value(true)
}

// jsonWalk reads valid JSON from b at i.
type jsonWalk struct {
	b []byte
	i int
}

func (w *jsonWalk) space() {
	for w.i < len(w.b) && (w.b[w.i] == ' ' || w.b[w.i] == '\t' || w.b[w.i] == '\n' || w.b[w.i] == '\r') {
		w.i++
	}
}

// value reads the value at i (after its leading space); top says it is the
// payload itself, whose time claims must be numbers.
func (w *jsonWalk) value(top bool) error {
	switch w.b[w.i] {
	case '{':
		return w.object(top)
	case '[':
		return w.members(']', func() error { return w.value(false) })
	case '"':
		w.str()
		return nil
	}
	for w.i < len(w.b) && !endOfLiteral(w.b[w.i]) {
		w.i++ // a number, true, false or null
	}
	return nil
}

func endOfLiteral(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// maxKeysCompared is the most keys of one object compared with each other
// pairwise; an object with more keeps them in a map.
const maxKeysCompared = 16

// members reads the array or object at i, calling each at each of its
// members (after its leading space) until end.
func (w *jsonWalk) members(end byte, each func() error) error {
	w.i++
	for {
		w.space()
		switch w.b[w.i] {
		case end:
			w.i++
			return nil
		case ',':
			w.i++
			w.space()
		}
		if err := each(); err != nil {
			return err
		}
	}
}

// object reads the object at i.
func (w *jsonWalk) object(top bool) error {
	var few [maxKeysCompared][]byte
	keys := objectKeys{few: few[:0]}
	return w.members('}', func() error {
		key, escaped := w.str()
		if escaped || !utf8.Valid(key) {
			return errEscapedKey
		}
		if !keys.add(key) {
			return fmt.Errorf("duplicate key %q in the claims", safeForMessage(string(key)))
		}
		w.space()
		w.i++ // :
		w.space()
		if name := string(key); top && (name == "exp" || name == "nbf" || name == "iat") {
			if c := w.b[w.i]; c != '-' && (c < '0' || c > '9') {
				return fmt.Errorf("claim %s must be a JSON number", name)
			}
		}
		return w.value(false)
	})
}

// objectKeys are the keys of one object read so far, as written: compared
// pairwise while they are few, in a map beyond.
type objectKeys struct {
	few  [][]byte
	many map[string]bool
}

// add adds key, reporting false if it was there already.
func (k *objectKeys) add(key []byte) bool {
	if k.many != nil {
		if k.many[string(key)] {
			return false
		}
		k.many[string(key)] = true
		return true
	}
	for _, f := range k.few {
		if bytes.Equal(f, key) {
			return false
		}
	}
	if len(k.few) < maxKeysCompared {
		k.few = append(k.few, key)
		return true
	}
	k.many = make(map[string]bool, 2*maxKeysCompared)
	for _, f := range k.few {
		k.many[string(f)] = true
	}
	k.many[string(key)] = true
	return true
}

// str reads the string at i and returns its text as written, and whether
// it holds an escape.
func (w *jsonWalk) str() ([]byte, bool) {
	start, escaped := w.i+1, false
	for j := start; ; j++ {
		switch w.b[j] {
		case '\\':
			escaped = true
			j++ // the escaped character: \" does not end the string
		case '"':
			w.i = j + 1
			return w.b[start:j], escaped
		}
	}
}
