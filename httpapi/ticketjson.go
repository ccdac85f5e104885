package httpapi

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd/onsale"
)

// writeTicket answers a queue ticket. Tickets answer every poll of a
// queue, so a ticket of plain values (text of printable ASCII without
// quotes or backslashes: all of them in practice) is written without reflection, byte for byte what writeJSON
// writes for it; any other goes through writeJSON.
func writeTicket(c echo.Context, t onsale.Ticket) error {
	if b, ok := appendTicket(make([]byte, 0, 320), t); ok {
		return c.Blob(http.StatusOK, contentTypeJSON, b)
	}
	return writeJSON(c, http.StatusOK, t)
}

// appendTicket appends the JSON of a ticket of plain values (the fields
// in order, null for an absent value, the time as its MarshalJSON writes
// it); ok is false for a ticket with any other value.
func appendTicket(b []byte, t onsale.Ticket) (_ []byte, ok bool) {
	if !plainText(t.ActivityID) || !plainText(t.UserID) || !plainText(string(t.State)) ||
		(t.AdmissionToken != nil && !plainText(*t.AdmissionToken)) {
		return b, false
	}
	expires := []byte("null")
	if t.TokenExpiresAt != nil {
		var err error
		if expires, err = t.TokenExpiresAt.MarshalJSON(); err != nil {
			return b, false
		}
	}
	b = append(b, `{"activity_id":"`...)
	b = append(b, t.ActivityID...)
	b = append(b, `","user_id":"`...)
	b = append(b, t.UserID...)
	b = append(b, `","state":"`...)
	b = append(b, t.State...)
	b = append(b, `","position":`...)
	b = appendOptionalInt(b, t.Position)
	b = append(b, `,"ahead":`...)
	b = appendOptionalInt(b, t.Ahead)
	b = append(b, `,"estimated_wait_seconds":`...)
	b = appendOptionalInt(b, t.EstimatedWaitSeconds)
	b = append(b, `,"admission_token":`...)
	if t.AdmissionToken == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(b, *t.AdmissionToken...)
		b = append(b, '"')
	}
	b = append(b, `,"token_expires_at":`...)
	b = append(b, expires...)
	b = append(b, `,"poll_after_ms":`...)
	b = strconv.AppendInt(b, t.PollAfterMS, 10)
	return append(b, '}'), true
}

func appendOptionalInt(b []byte, v *int64) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, *v, 10)
}

// plainText reports whether s is written into JSON as it is: printable
// ASCII other than a quote or a backslash.
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
