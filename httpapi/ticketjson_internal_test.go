package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/onsale"
)

// answered returns the status, headers and body that write gives a GET,
// and its error.
func answered(write func(echo.Context) error) (*httptest.ResponseRecorder, error) {
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/", nil), rec)
	return rec, write(c)
}

func TestTicketIsWrittenAsWriteJSONWritesIt(t *testing.T) {
	t.Parallel()
	r := mrand.New(mrand.NewPCG(1, 2))
	pick := func(values ...string) string { return values[r.IntN(len(values))] }
	num := func() *int64 {
		if r.IntN(3) == 0 {
			return nil
		}
		n := []int64{0, 1, -1, 42, math.MaxInt64, math.MinInt64, r.Int64()}[r.IntN(7)]
		return &n
	}
	zones := []*time.Location{time.UTC, time.FixedZone("east", 5*3600+30*60), time.FixedZone("west", -8*3600),
		time.FixedZone("seconds", 3600+7), time.FixedZone("far", 25*3600)}
	plain, odd, failed := 0, 0, 0
	for range 2000 {
		tk := onsale.Ticket{
			ActivityID:           pick("a_01JD00000000000000000003E9", "", "act<1>&", "act\"quoted\"", "back\\slash"),
			UserID:               pick("user-1", "Zoë", "用户", "line\u2028sep", "tab\tin", "bad\xffutf8", "a b"),
			State:                onsale.State(pick("waiting", "admitted", "used", "expired", "sold_out")),
			Position:             num(),
			Ahead:                num(),
			EstimatedWaitSeconds: num(),
			PollAfterMS:          r.Int64N(100_000),
		}
		if r.IntN(2) == 0 {
			tok := pick("0b5e0f52-7a0b-4c55-9a8e-6f7c1d2e3f40", "tok\"en", "")
			tk.AdmissionToken = &tok
		}
		if r.IntN(2) == 0 {
			at := time.Date(pick2(r, 2026, 1, 9999, 10000, -1), time.December, 2, 7, 8, 9, r.IntN(2)*r.IntN(1e9), zones[r.IntN(len(zones))])
			tk.TokenExpiresAt = &at
		}
		want, wantErr := answered(func(c echo.Context) error { return writeJSON(c, http.StatusOK, tk) })
		got, err := answered(func(c echo.Context) error { return writeTicket(c, tk) })
		require.Equal(t, wantErr, err)
		require.Equal(t, want.Code, got.Code)
		require.Equal(t, want.Header(), got.Header())
		require.Equal(t, want.Body.String(), got.Body.String())
		if err != nil {
			failed++
		}
		if _, ok := appendTicket(nil, tk); ok {
			plain++
		} else {
			odd++
		}
	}
	require.Positive(t, plain, "tickets written without reflection")
	require.Positive(t, odd, "tickets written through writeJSON")
	require.Positive(t, failed, "times JSON cannot hold, refused alike")
}

func pick2(r *mrand.Rand, years ...int) int { return years[r.IntN(len(years))] }

// BenchmarkTicket compares a waiting ticket's encoding without reflection
// with encoding/json's, as writeJSON runs it.
func BenchmarkTicket(b *testing.B) {
	pos, ahead, wait := int64(1234), int64(233), int64(1)
	tk := onsale.Ticket{ActivityID: "a_01JD00000000000000000003E9", UserID: "user-4711", State: onsale.Waiting,
		Position: &pos, Ahead: &ahead, EstimatedWaitSeconds: &wait, PollAfterMS: 1000}
	b.Run("appendTicket", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := appendTicket(make([]byte, 0, 320), tk); !ok {
				b.Fatal("not plain")
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(tk); err != nil {
				b.Fatal(err)
			}
		}
	})
}
