package registration_test

import (
	"encoding/base64"
	"regexp"
	"testing"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// publicID is the form of the ids a cursor may carry.
var publicID = regexp.MustCompile(`^[ar]_[0-9A-HJKMNP-TV-Z]{26}$`)

// FuzzDecodeCursor checks that any cursor either decodes to a public id of
// the listing's prefix, which encodes back to the very same cursor (one
// cursor per item, nothing else hidden in it), or is refused with
// invalid_request; never a panic. A digit string, which an internal row
// number would be, is never a cursor.
func FuzzDecodeCursor(f *testing.F) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, s := range []string{
		"", "cjE", "cjA", "ci0x", "!!", "cg", enc("r43029"), enc("r_01JD0000000000000000000000"), enc("a_01JD0000000000000000000000"),
		enc("r_01JD000000000000000000000U"), enc("r_01jd0000000000000000000000"), enc("r_01JD0000000000000000000000x"),
		enc("r_01JD0000000000000000000000") + "=", registration.EncodeCursor("r_7ZZZZZZZZZZZZZZZZZZZZZZZZZ"),
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, registrations bool) {
		prefix := registration.ActivityCursor
		if registrations {
			prefix = registration.RegistrationCursor
		}
		id, err := registration.DecodeCursor(s, prefix)
		if err != nil {
			if !capacityd.IsCode(err, capacityd.EInvalid) {
				t.Fatalf("DecodeCursor(%q): %v, want invalid_request", s, err)
			}
			return
		}
		if !publicID.MatchString(id) || id[:2] != prefix {
			t.Fatalf("DecodeCursor(%q, %q) = %q, not a public id of the listing", s, prefix, id)
		}
		if back := registration.EncodeCursor(id); back != s {
			t.Fatalf("DecodeCursor(%q) = %q, which encodes to %q", s, id, back)
		}
	})
}

func TestCursorsCarryPublicIDsOnly(t *testing.T) {
	t.Parallel()
	id := "r_01JD0000000000000000000000"
	c := registration.EncodeCursor(id)
	got, err := registration.DecodeCursor(c, registration.RegistrationCursor)
	if err != nil || got != id {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	if _, err := registration.DecodeCursor(c, registration.ActivityCursor); !capacityd.IsCode(err, capacityd.EInvalid) {
		t.Fatalf("a registration cursor on the activity listing: %v, want invalid_request", err)
	}
	// The cursors of before: the internal row number.
	for _, old := range []string{"cjQzMDI5", "cjE", "cjA"} {
		if _, err := registration.DecodeCursor(old, registration.RegistrationCursor); !capacityd.IsCode(err, capacityd.EInvalid) {
			t.Fatalf("%q: %v, want invalid_request", old, err)
		}
	}
}
