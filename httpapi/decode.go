package httpapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
)

// contentTypeJSON is the Content-Type of every JSON response.
const contentTypeJSON = "application/json; charset=utf-8"

// maxBodyBytes is the largest request body accepted.
const maxBodyBytes = 64 << 10

// bodyLimit is maxBodyBytes as echo's BodyLimit reads sizes: "K" would be
// 1,000 bytes there, "KiB" is 1,024.
const bodyLimit = "64KiB"

// writeJSON writes v as the JSON response body. Text is written as it is:
// <, > and & are not turned into \u003c, \u003e and \u0026 (responses are
// JSON, never HTML, and nosniff keeps browsers from reading them as such).
func writeJSON(c echo.Context, status int, v any) error {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	defer putJSONBuffer(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	// Blob copies the bytes into the response before it returns.
	return c.Blob(status, contentTypeJSON, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// jsonBuffers keeps the buffers responses are encoded into between
// requests, so that an answer does not grow a new one.
var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer is the largest buffer kept for the next response: a
// large listing's buffer is left to the collector.
const maxPooledBuffer = 64 << 10

func putJSONBuffer(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledBuffer {
		return
	}
	buf.Reset()
	jsonBuffers.Put(buf)
}

// readBody reads the request body, refusing more than maxBodyBytes with
// payload_too_large.
func readBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > maxBodyBytes {
		return nil, capacityd.Errorf(capacityd.EPayloadTooLarge, "request body is larger than 64 KiB")
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		var he *echo.HTTPError // echo's BodyLimit on a body without Content-Length
		if errors.As(err, &mbe) || (errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge) {
			return nil, capacityd.Errorf(capacityd.EPayloadTooLarge, "request body is larger than 64 KiB")
		}
		return nil, capacityd.Errorf(capacityd.EInvalid, "could not read the request body")
	}
	if len(b) > maxBodyBytes {
		return nil, capacityd.Errorf(capacityd.EPayloadTooLarge, "request body is larger than 64 KiB")
	}
	return b, nil
}

// decodeJSON decodes the request body into v strictly: one JSON value,
// no unknown fields, the right types. An empty body is an error unless
// allowEmpty, in which case v is left as it is.
func decodeJSON(c echo.Context, v any, allowEmpty bool) error {
	b, err := readBody(c)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if allowEmpty {
			return nil
		}
		return capacityd.Errorf(capacityd.EInvalid, "request body must be a JSON object")
	}
	if emptyObject(b) && plainStruct(v) {
		// What decodeStrict would conclude, without its passes over b: {}
		// sets no field of a struct, and has no key to refuse.
		return nil
	}
	return decodeStrict(b, v)
}

// emptyObject reports whether b is the JSON object {}, without spaces:
// the body of most signups, which ask for nothing but a seat.
func emptyObject(b []byte) bool {
	return len(b) == 2 && b[0] == '{' && b[1] == '}'
}

// plainStruct reports whether v points to a struct that decodes itself
// with encoding/json's rules (no UnmarshalJSON of its own).
func plainStruct(v any) bool {
	if _, ok := v.(json.Unmarshaler); ok {
		return false
	}
	t := reflect.TypeOf(v)
	return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct
}

// decodeStrict decodes b into v, translating decoder errors into
// invalid_request messages that say what is wrong. A key named twice in
// any object of b is refused, and so is a body that is not valid UTF-8 or
// a text field that is not plain text (see validBody and textOnly, which
// walks b once for both rules).
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return capacityd.Errorf(capacityd.EInvalid, "request body must hold a single JSON value")
	}
	if err := validBody(b); err != nil {
		return err
	}
	keys, err := textOnly(b) // duplicate keys too
	if err != nil {
		return err
	}
	return exactFields(keys, v)
}

// exactFields refuses a key of the request's object (keys) that names a
// field of the struct v points to only when case is ignored, as
// encoding/json matches them ("Capacity" for "capacity"): it is an unknown
// field.
func exactFields(keys []string, v any) error {
	t := reflect.TypeOf(v)
	if len(keys) == 0 || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	names := fieldNamesOf(t.Elem())
	for _, k := range keys {
		if !names[k] {
			return capacityd.Errorf(capacityd.EInvalid, "unknown field %q", safeForMessage(k))
		}
	}
	return nil
}

// structFields keeps the JSON names of the fields of each struct type a
// body was decoded into.
var structFields sync.Map // reflect.Type → map[string]bool

// fieldNamesOf returns the JSON names of struct type t's fields (see
// fieldNames), found once per type.
func fieldNamesOf(t reflect.Type) map[string]bool {
	if names, ok := structFields.Load(t); ok {
		return names.(map[string]bool)
	}
	names := make(map[string]bool, t.NumField())
	fieldNames(t, names)
	structFields.Store(t, names)
	return names
}

// fieldNames adds the JSON names of struct type t's fields to names, and
// those of its embedded structs without a name of their own, as
// encoding/json promotes them.
func fieldNames(t reflect.Type, names map[string]bool) {
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			fieldNames(f.Type, names)
			continue
		}
		names[cmp.Or(name, f.Name)] = true
	}
}

func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return capacityd.Errorf(capacityd.EInvalid, "malformed JSON at byte %d", syn.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return capacityd.Errorf(capacityd.EInvalid, "malformed JSON: unexpected end of input")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return capacityd.Errorf(capacityd.EInvalid, "request body must be a JSON object")
		}
		return capacityd.Errorf(capacityd.EInvalid, "field %q must be %s", typ.Field, jsonKind(typ.Type.Kind().String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return capacityd.Errorf(capacityd.EInvalid, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return capacityd.Errorf(capacityd.EInvalid, "malformed JSON")
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int32", "int64":
		return "an integer"
	case "string":
		return "a string"
	case "ptr", "struct", "map":
		return "an object"
	}
	return "of another type"
}

// idPattern matches the public ids the service issues: a one-letter prefix
// and a ULID. Anything else names nothing, whatever its form.
var idPattern = regexp.MustCompile(`^[abprs]_[0-9A-HJKMNP-TV-Z]{26}$`)

// pathID returns the path parameter name if it has the form of an id with
// the given prefix ("a", "b", "p", "r" or "s"), else a not_found error built by notFound.
func pathID(c echo.Context, name, prefix string, notFound func(string) error) (string, error) {
	id := c.Param(name)
	if !idPattern.MatchString(id) || id[0] != prefix[0] {
		return "", notFound(safeForMessage(id))
	}
	return id, nil
}

// safeForMessage shortens and cleans a client-supplied value for an error
// message.
func safeForMessage(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s), "")
}
