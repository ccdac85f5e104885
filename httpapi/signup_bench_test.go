package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/registration"
)

// signupOnly is a registration service whose signups all take a seat at
// once, and that keeps nothing: the edge's own work is all a benchmark of
// it measures. Any other method panics (the embedded interface is nil).
type signupOnly struct {
	httpapi.Registrations
	at time.Time
}

func (f signupOnly) Signup(_ context.Context, in registration.SignupInput) (registration.Registration, bool, error) {
	return registration.Registration{
		ID: fakeRegID, ActivityID: in.ActivityID, UserID: in.Caller.UserID, Status: registration.Pending,
		Seats: max(in.Seats, 1), Metadata: in.Metadata, CreatedAt: f.at, UpdatedAt: f.at,
		ExpiresAt: new(f.at.Add(10 * time.Minute)),
	}, false, nil
}

// BenchmarkSignupEdge is a plain signup (POST
// /v1/activities/{id}/registrations with the body {}, an HS256 token)
// through the whole HTTP edge: every middleware, the access log at info
// (written to io.Discard), token verification, the handler and the JSON
// answer, with the registration service faked. fresh_token signs every
// signup with a token of its own, as signup_hot does (each is verified in
// full); same_token sends one token every time (answered by the verified
// token cache). Its allocations are reported: a change that adds work to
// the path shows in them (docs/benchmarks.md, "The edge's benchmark").
// The request and recorder of each signup are the benchmark's own.
func BenchmarkSignupEdge(b *testing.B) {
	auth, err := httpapi.NewTokenAuthenticator(b.Context(), httpapi.TokenConfig{Secret: []byte(apptest.Secret)})
	require.NoError(b, err)
	srv := httpapi.New(httpapi.Config{
		Registrations: signupOnly{at: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}, Auth: auth,
		PingPostgres: func(context.Context) error { return nil },
		Logger:       slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	h := srv.Handler()
	path := "/v1/activities/" + fakeActivityID + "/registrations"
	signup := func(b *testing.B, token string) {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatalf("signup: status %d, body %s", rec.Code, rec.Body)
		}
	}
	sign := func(b *testing.B, i int) string {
		tok, err := auth.Sign(fmt.Sprintf("bench-user-%d", i), false, time.Hour)
		require.NoError(b, err)
		return tok
	}
	b.Run("fresh_token", func(b *testing.B) {
		tokens := make([]string, b.N)
		for i := range tokens {
			tokens[i] = sign(b, i)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			signup(b, tokens[i])
		}
	})
	b.Run("same_token", func(b *testing.B) {
		token := sign(b, -1)
		signup(b, token) // verified in full once, then remembered
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			signup(b, token)
		}
	})
}
