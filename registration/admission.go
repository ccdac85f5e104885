package registration

import (
	"bytes"
	"encoding/json"

	"github.com/physiciansnet/capacityd"
)

// AdmissionRequest is one signup waiting in an activity's admission batch.
type AdmissionRequest struct {
	// RegistrationID is the public id the registration gets if admitted.
	RegistrationID string
	UserID         string
	Metadata       json.RawMessage
	// IdempotencyKey is empty when the client sent none.
	IdempotencyKey string
	// RequestHash identifies the request body for idempotency conflicts.
	RequestHash []byte
}

// AdmissionResult is the outcome of one AdmissionRequest.
type AdmissionResult struct {
	// Registration is set when the request created a registration, or
	// replays one that did.
	Registration *Registration
	// Err is a *capacityd.Error (activity_full, already_registered,
	// idempotency_conflict) when the request was refused.
	Err error
	// Replayed is true when the result is an earlier outcome of the same
	// Idempotency-Key.
	Replayed bool
}

// Outcome kinds stored with an idempotency key.
const (
	OutcomeCreated = "created"
)

// IdempotentOutcome is the stored first outcome of an Idempotency-Key.
type IdempotentOutcome struct {
	UserID      string
	Key         string
	RequestHash []byte
	// Outcome is OutcomeCreated or the error code of the refusal.
	Outcome        string
	RegistrationID string
	// Body is the registration's JSON for OutcomeCreated, else the error
	// message.
	Body []byte
}

// Result turns a stored outcome back into the result it recorded, checking
// that the replaying request carries the same body.
func (o IdempotentOutcome) Result(requestHash []byte) AdmissionResult {
	if !bytes.Equal(o.RequestHash, requestHash) {
		return AdmissionResult{Err: capacityd.Errorf(capacityd.EIdempotencyConflict,
			"Idempotency-Key %q was already used with a different request", o.Key)}
	}
	if o.Outcome == OutcomeCreated {
		var r Registration
		if err := json.Unmarshal(o.Body, &r); err == nil {
			return AdmissionResult{Registration: &r, Replayed: true}
		}
	}
	return AdmissionResult{Replayed: true, Err: &capacityd.Error{
		Code: o.Outcome, Message: string(o.Body), RegistrationID: o.RegistrationID,
	}}
}

// OutcomeOf records result as the stored outcome of req.
func OutcomeOf(req AdmissionRequest, res AdmissionResult) (IdempotentOutcome, error) {
	o := IdempotentOutcome{UserID: req.UserID, Key: req.IdempotencyKey, RequestHash: req.RequestHash}
	if res.Err == nil {
		body, err := json.Marshal(res.Registration)
		if err != nil {
			return o, err
		}
		o.Outcome, o.RegistrationID, o.Body = OutcomeCreated, res.Registration.ID, body
		return o, nil
	}
	var e *capacityd.Error
	if ce, ok := res.Err.(*capacityd.Error); ok {
		e = ce
	} else {
		e = &capacityd.Error{Code: capacityd.EInternal, Message: res.Err.Error()}
	}
	o.Outcome, o.RegistrationID, o.Body = e.Code, e.RegistrationID, []byte(e.Message)
	return o, nil
}

// AdmissionState is what the authority knows about an activity while its
// admission lock is held.
type AdmissionState struct {
	Capacity int
	Taken    int
	// Holders maps the batch's users that already hold an occupying
	// registration to its id.
	Holders map[string]string
	// Outcomes holds the stored outcomes of the batch's idempotency keys,
	// by user and key.
	Outcomes map[IdempotencyRef]IdempotentOutcome
}

// IdempotencyRef names an idempotency key: it is scoped to a user and an
// activity.
type IdempotencyRef struct{ UserID, Key string }

// Decision is what Decide says about one request of a batch.
type Decision struct {
	// Admit is true when a registration must be inserted for the request.
	Admit bool
	// Result is the outcome when Admit is false and SameAs < 0.
	Result AdmissionResult
	// SameAs is the index of an earlier request of the batch whose outcome
	// this one replays (same user and key), or -1.
	SameAs int
	// Record is true when the outcome must be stored under the request's
	// idempotency key.
	Record bool
}

// Decide admits the requests of one batch in order, exactly: no more than
// capacity-taken new registrations, none for a user who holds one already
// (in the database or earlier in the batch), and stored idempotent outcomes
// replayed instead of acted on again.
func Decide(activityID string, st AdmissionState, reqs []AdmissionRequest) []Decision {
	free := st.Capacity - st.Taken
	out := make([]Decision, len(reqs))
	holders := make(map[string]string, len(reqs))
	firstUse := make(map[IdempotencyRef]int)
	for i, req := range reqs {
		d := Decision{SameAs: -1}
		ref := IdempotencyRef{req.UserID, req.IdempotencyKey}
		if req.IdempotencyKey != "" {
			if o, ok := st.Outcomes[ref]; ok {
				d.Result = o.Result(req.RequestHash)
				out[i] = d
				continue
			}
			if j, ok := firstUse[ref]; ok {
				if !bytes.Equal(reqs[j].RequestHash, req.RequestHash) {
					d.Result = AdmissionResult{Err: capacityd.Errorf(capacityd.EIdempotencyConflict,
						"Idempotency-Key %q was already used with a different request", req.IdempotencyKey)}
				} else {
					d.SameAs = j
				}
				out[i] = d
				continue
			}
			firstUse[ref] = i
			d.Record = true
		}
		switch {
		case st.Holders[req.UserID] != "":
			d.Result.Err = AlreadyRegistered(activityID, st.Holders[req.UserID])
		case holders[req.UserID] != "":
			d.Result.Err = AlreadyRegistered(activityID, holders[req.UserID])
		case free > 0:
			free--
			d.Admit = true
			holders[req.UserID] = req.RegistrationID
		default:
			d.Result.Err = ActivityFull(activityID)
		}
		out[i] = d
	}
	return out
}
