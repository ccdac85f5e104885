package apptest

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/physiciansnet/capacityd/client"
)

// Signup signs user up for an activity through the typed client (over
// Client) with the options given (none: no idempotency key, no metadata).
// The error is the service's refusal (a *client.Error, see Refusal) or
// what kept the request from being answered.
func (i *Instance) Signup(t testing.TB, activityID, user string, opts ...client.SignupOptions) (client.SignupResult, error) {
	t.Helper()
	var o client.SignupOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	return i.API(t, user, false).Signup(context.Background(), activityID, o)
}

// MustSignup is Signup that fails the test unless the user was admitted
// (201: a seat, not a place in the waiting list), and returns the
// registration.
func (i *Instance) MustSignup(t testing.TB, activityID, user string, opts ...client.SignupOptions) client.Registration {
	t.Helper()
	res, err := i.Signup(t, activityID, user, opts...)
	if err != nil {
		t.Fatalf("signup of %s to %s: %v", user, activityID, err)
	}
	if res.Waitlisted {
		t.Fatalf("signup of %s to %s: waitlisted, want a seat", user, activityID)
	}
	return res.Registration
}

// Refusal returns the service's refusal of a typed client call, and fails
// the test unless err is one: nil (the call succeeded) and errors other
// than *client.Error (transport, API description) fail.
func Refusal(t testing.TB, err error) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a refusal (*client.Error), got %v", err)
	}
	return e
}

// SignupStatus returns the HTTP status a signup was answered with, from
// the typed client's outcome: 201 admitted, 202 waitlisted, a refusal's
// status, or -1 when the request got no answer.
//
//	apptest.SignupStatus(inst.Signup(t, id, "bob"))
func SignupStatus(res client.SignupResult, err error) int {
	var e *client.Error
	switch {
	case err == nil && res.Waitlisted:
		return http.StatusAccepted
	case err == nil:
		return http.StatusCreated
	case errors.As(err, &e):
		return e.Status
	}
	return -1
}
