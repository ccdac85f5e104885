package loadtest

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/physiciansnet/capacityd/client"
)

// rushTally counts a rush's signup answers by status and, apart, its
// refusals as full; safe for concurrent use.
type rushTally struct {
	answers statusTally
	// full counts activity_full refusals.
	full atomic.Int64
}

// tally counts one signup's answer: it returns the answer's status and
// whether it was a refusal as full (409 activity_full), or the error of a
// signup that got no answer to count.
func (t *rushTally) tally(res client.SignupResult, err error) (status int, full bool, _ error) {
	full = client.IsCode(err, client.CodeActivityFull)
	status, err = signupAnswer(res, err)
	if err != nil {
		return 0, false, err
	}
	t.answers.add(status)
	if full {
		t.full.Add(1)
	}
	return status, full, nil
}

// seatRun is what a rush of one-seat signups' answers said, per activity.
type seatRun struct {
	rushTally
	// seated counts each activity's signups answered 201.
	seated []atomic.Int64
	// refused is set for an activity that refused someone as full.
	refused []atomic.Bool
}

// record counts one signup's answer for activity a: a seat (201) or a
// refusal as full (409 activity_full: the activity, or a pool it is in,
// had no seat left) is a success, anything else fails.
func (r *seatRun) record(a int, res client.SignupResult, err error) error {
	st, full, err := r.tally(res, err)
	if err != nil {
		return err
	}
	switch {
	case full:
		r.refused[a].Store(true)
	case st == http.StatusCreated:
		r.seated[a].Add(1)
	default:
		return fmt.Errorf("status %d", st)
	}
	return nil
}
