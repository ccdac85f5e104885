package registration

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/physiciansnet/capacityd"
)

// Outcome kinds stored with an idempotency key; a refusal is stored under
// its error code.
const (
	OutcomeCreated    = "created"
	OutcomeWaitlisted = "waitlisted"
)

// IdempotencyRef names an idempotency key: it is scoped to a user and an
// activity.
type IdempotencyRef struct{ UserID, Key string }

// IdempotentOutcome is the stored first outcome of an Idempotency-Key.
type IdempotentOutcome struct {
	UserID      string
	Key         string
	RequestHash []byte
	// Outcome is OutcomeCreated, OutcomeWaitlisted or the error code of
	// the refusal.
	Outcome        string
	RegistrationID string
	// Body is the registration's JSON for a created or waitlisted outcome,
	// else the error message.
	Body []byte
}

// Replay turns a stored outcome back into the outcome it recorded, checking
// that the replaying request carries the same body.
func (o IdempotentOutcome) Replay(requestHash []byte) Outcome {
	if !bytes.Equal(o.RequestHash, requestHash) {
		return Outcome{Err: idempotencyConflict(o.Key)}
	}
	if o.Outcome == OutcomeCreated || o.Outcome == OutcomeWaitlisted {
		var r Registration
		if err := json.Unmarshal(o.Body, &r); err == nil {
			return Outcome{Registration: &r, Replayed: true}
		}
	}
	e := &capacityd.Error{Code: o.Outcome, Message: string(o.Body), RegistrationID: o.RegistrationID}
	var stored storedError
	if bytes.HasPrefix(o.Body, []byte("{")) && json.Unmarshal(o.Body, &stored) == nil {
		e.Message, e.Remaining, e.RegistrationIDs = stored.Message, stored.Remaining, stored.RegistrationIDs
	}
	return Outcome{Replayed: true, Err: e}
}

// storedError is the stored body of a refusal that carries more than its
// message (activity_full's remaining, limit_reached's registrations). A refusal with only a message is
// stored as the message itself.
type storedError struct {
	Message         string   `json:"message"`
	Remaining       *int     `json:"remaining,omitempty"`
	RegistrationIDs []string `json:"registration_ids,omitempty"`
}

func idempotencyConflict(key string) error {
	return capacityd.Errorf(capacityd.EIdempotencyConflict,
		"Idempotency-Key %q was already used with a different request", key)
}

// outcomeOf records the outcome of a signup as the stored outcome of its
// idempotency key.
func outcomeOf(c SignupCommand, out Outcome) (IdempotentOutcome, error) {
	o := IdempotentOutcome{UserID: c.UserID, Key: c.IdempotencyKey, RequestHash: c.RequestHash}
	if out.Err == nil {
		body, err := json.Marshal(out.Registration)
		if err != nil {
			return o, err
		}
		o.Outcome, o.RegistrationID, o.Body = OutcomeCreated, out.Registration.ID, body
		if out.Registration.Status == Waitlisted {
			o.Outcome = OutcomeWaitlisted
		}
		return o, nil
	}
	var e *capacityd.Error
	if !errors.As(out.Err, &e) {
		e = &capacityd.Error{Code: capacityd.EInternal, Message: out.Err.Error()}
	}
	o.Outcome, o.RegistrationID, o.Body = e.Code, e.RegistrationID, []byte(e.Message)
	if e.Remaining != nil || e.RegistrationIDs != nil {
		body, err := json.Marshal(storedError{Message: e.Message, Remaining: e.Remaining, RegistrationIDs: e.RegistrationIDs})
		if err != nil {
			return o, err
		}
		o.Body = body
	}
	return o, nil
}
