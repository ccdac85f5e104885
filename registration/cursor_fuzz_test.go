package registration_test

import (
	"testing"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// FuzzDecodeCursor checks that any cursor either decodes to a non-negative
// sequence that encodes back to a cursor of the same sequence, or is
// refused with invalid_request; never a panic.
func FuzzDecodeCursor(f *testing.F) {
	for _, s := range []string{"", "cjE", "cjA", "ci0x", "!!", "cg", registration.EncodeCursor(1 << 62), "cjk5OTk5OTk5OTk5OTk5OTk5OTk5OTk"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seq, err := registration.DecodeCursor(s)
		if err != nil {
			if !capacityd.IsCode(err, capacityd.EInvalid) {
				t.Fatalf("DecodeCursor(%q): %v, want invalid_request", s, err)
			}
			return
		}
		if seq < 0 {
			t.Fatalf("DecodeCursor(%q) = %d", s, seq)
		}
		back, err := registration.DecodeCursor(registration.EncodeCursor(seq))
		if err != nil || back != seq {
			t.Fatalf("round trip of %d: %d, %v", seq, back, err)
		}
	})
}
