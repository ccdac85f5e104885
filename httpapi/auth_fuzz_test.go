package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/physiciansnet/capacityd"
)

// FuzzVerifyToken checks token parsing: any string is refused with
// unauthenticated unless it is an HS256 token with exp and a valid sub.
func FuzzVerifyToken(f *testing.F) {
	a, err := NewAuthenticator([]byte("fuzz-secret-fuzz-secret-fuzz-secret!"))
	if err != nil {
		f.Fatal(err)
	}
	good, _ := a.Sign("alice", true, time.Hour)
	for _, s := range []string{
		good, good + "x", strings.TrimSuffix(good, good[len(good)-2:]), "", ".", "..", "a.b.c", "a.b.c.d",
		"eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4IiwiZXhwIjo5OTk5OTk5OTk5fQ.",
		"eyJhbGciOiJIUzUxMiJ9.eyJzdWIiOiJ4IiwiZXhwIjo5OTk5OTk5OTk5fQ.AAAA",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		caller, err := a.Verify(tok)
		if err != nil {
			if !capacityd.IsCode(err, capacityd.EUnauthenticated) {
				t.Fatalf("Verify: %v, want unauthenticated", err)
			}
			return
		}
		// Accepted: it must be a well-formed HS256 token with a valid sub.
		parts := strings.Split(tok, ".")
		if len(parts) != 3 {
			t.Fatalf("accepted a token of %d parts", len(parts))
		}
		hdr, err := base64.RawURLEncoding.DecodeString(parts[0])
		var h struct{ Alg string }
		if err != nil || json.Unmarshal(hdr, &h) != nil || h.Alg != "HS256" {
			t.Fatalf("accepted a token with header %q", hdr)
		}
		if n := len(caller.UserID); n < 1 || n > 128 || !utf8.ValidString(caller.UserID) {
			t.Fatalf("accepted sub %q", caller.UserID)
		}
	})
}
