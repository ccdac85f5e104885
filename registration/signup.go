package registration

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

// SignupInput is a signup request: the caller signs up for the activity.
type SignupInput struct {
	ActivityID string
	Caller     Caller
	Metadata   []byte // a compact JSON object
	// Seats is how many seats the signup asks for, all or nothing (0
	// reads as 1).
	Seats          int
	IdempotencyKey string
	// Code is a block's code ("" for none): the block's seats serve the
	// signup first.
	Code string
	// AdmissionToken is the token of the caller's admitted place in the
	// activity's admission queue ("" for none).
	AdmissionToken string
	// Door is set for a walk-in: the door staff who signs Caller up at a
	// check-in list. The signup skips the activity's admission queue and
	// its events record Door as their actor.
	Door *Caller
}

// Signup admits the caller to the activity, puts them on its waiting list,
// or refuses, exactly. The display tier's gate holds a seat for the signup
// in flight, or sheds it when every seat is taken; a refusal as full is
// always confirmed by the authority first. The authority decides on the
// activity's queue. replayed is true when the outcome (registration or
// error) is the stored first outcome of the same Idempotency-Key.
func (s *Service) Signup(ctx context.Context, in SignupInput) (reg Registration, replayed bool, err error) {
	if err := validateSignup(in); err != nil {
		return Registration{}, false, err
	}
	cmd := SignupCommand{
		Origin:         in.Caller.origin(),
		RegistrationID: s.newID("r_"),
		UserID:         in.Caller.UserID,
		Metadata:       in.Metadata,
		Seats:          max(in.Seats, 1),
		IdempotencyKey: in.IdempotencyKey,
		Code:           in.Code,
		Roles:          in.Caller.Roles,
		AdmissionToken: in.AdmissionToken,
	}
	if in.Door != nil {
		cmd.Origin, cmd.WalkIn = in.Door.origin(), true
	}
	if in.IdempotencyKey != "" {
		cmd.RequestHash = requestHash(in)
		o, ok, err := s.store.FindOutcome(ctx, in.ActivityID, cmd.UserID, in.IdempotencyKey)
		if err != nil {
			return Registration{}, false, err
		}
		if ok {
			return s.signupResult(o.Replay(cmd.RequestHash), "replayed")
		}
	}
	if s.gate != nil {
		hold, err := s.gate.Reserve(ctx, in.ActivityID, cmd.Seats)
		switch {
		case err == nil:
			cmd.Hold = hold
		case errors.Is(err, ErrGateFull):
			// A first use of an idempotency key must record its outcome
			// at the authority, in the change transaction; and a block's
			// audience (a code, or a token with roles) may take seats the
			// public cannot: the authority decides on them.
			if in.IdempotencyKey == "" && cmd.Code == "" && len(cmd.Roles) == 0 {
				if err := s.confirmFull(ctx, in.ActivityID, cmd.UserID, cmd.Seats); err != nil {
					return Registration{}, false, err
				}
			}
		case errors.Is(err, ErrGateWaitlist):
		default:
			// No counter yet, or the display tier cannot answer: the
			// authority decides alone.
		}
	}
	out, err := s.submit(ctx, in.ActivityID, cmd)
	if err != nil {
		s.metrics.signups.WithLabelValues("error").Inc()
		return Registration{}, false, err
	}
	return s.signupResult(out, "")
}

// confirmFull asks the authority whether the activity the gate called full
// is full for the user, in one read-only snapshot shared with the other
// signups the gate shed meanwhile. It returns the refusal (activity_full,
// or already_registered for a user who holds or waits for a place), a
// failure, or nil when the signup must go on to the activity's queue:
// Admit, on the authority's counts, gives it a seat (the gate's holds were
// not all admissions in flight) or a place on the waiting list.
func (s *Service) confirmFull(ctx context.Context, activityID, userID string, seats int) error {
	v, err := s.checks.Submit(ctx, activityID, userID)
	switch {
	case err != nil:
		s.metrics.signups.WithLabelValues("error").Inc()
		return UnavailableIfNotFlushed(err)
	case v.holder != "":
		s.metrics.signups.WithLabelValues("already_registered").Inc()
		return AlreadyRegistered(activityID, v.holder)
	case v.maxSeats > 0 && seats > v.maxSeats:
		s.metrics.signups.WithLabelValues(capacityd.EInvalid).Inc()
		return TooManySeats(Activity{ID: activityID, MaxSeats: v.maxSeats}, seats)
	}
	if c := v.counts.For(seats); Admit(c) == AdmitFull {
		s.metrics.signups.WithLabelValues("full_gate").Inc()
		return ActivityFull(activityID, c)
	}
	s.metrics.fullChecksPassed.Inc()
	return nil
}

// fullVerdict is one user's answer from a FullAnswer: the activity's
// counts and the user's active registration, if any.
type fullVerdict struct {
	counts   Counts
	holder   string
	maxSeats int
}

// checkFull is the flush of the full checks: one snapshot of the authority
// for the shed signups of many activities. A check that fails on one
// request's data is made again without it (groupcommit.Isolate).
func (s *Service) checkFull(ctx context.Context, batches []*groupcommit.Batch[string, string, fullVerdict]) error {
	return groupcommit.Isolate(s.checkFullOnce, commandsAtFault)(ctx, batches)
}

func (s *Service) checkFullOnce(ctx context.Context, batches []*groupcommit.Batch[string, string, fullVerdict]) error {
	checks := make([]FullCheck, len(batches))
	for i, b := range batches {
		checks[i] = FullCheck{ActivityID: b.Key, UserIDs: b.Reqs}
	}
	answers, err := s.store.CheckFull(ctx, checks)
	if err != nil {
		return err
	}
	for i, b := range batches {
		a := answers[i]
		b.Results = make([]fullVerdict, len(b.Reqs))
		for j, u := range b.Reqs {
			b.Results[j] = fullVerdict{counts: a.Counts(), holder: a.Holders[u], maxSeats: a.MaxSeats}
		}
	}
	return nil
}

func (s *Service) signupResult(out Outcome, label string) (Registration, bool, error) {
	if label == "" {
		switch {
		case out.Replayed:
			label = "replayed"
		case out.Err != nil:
			label = capacityd.ErrorCode(out.Err)
		case out.Registration.Status == Waitlisted:
			label = "waitlisted"
		default:
			label = "admitted"
		}
	}
	s.metrics.signups.WithLabelValues(label).Inc()
	if out.Err != nil {
		return Registration{}, out.Replayed, out.Err
	}
	return *out.Registration, out.Replayed, nil
}

// requestHash identifies a signup's request for idempotency conflicts: its
// metadata, and its seats when it asks for more than one (a one-seat
// signup hashes as before seats existed).
func requestHash(in SignupInput) []byte {
	h := sha256.New()
	h.Write(in.Metadata)
	if in.Seats > 1 {
		fmt.Fprintf(h, "\x00seats=%d", in.Seats)
	}
	if in.Code != "" {
		fmt.Fprintf(h, "\x00code=%s", in.Code)
	}
	return h.Sum(nil)
}

func validateSignup(in SignupInput) error {
	if !storable(in.ActivityID) {
		return ActivityNotFound(in.ActivityID)
	}
	if in.Seats < 0 || in.Seats > MaxSeatsLimit {
		return capacityd.Errorf(capacityd.EInvalid, "seats must be between 1 and %d", MaxSeatsLimit)
	}
	if err := validateCaller(in.Caller); err != nil {
		return err
	}
	if err := validCode(in.Code); err != nil {
		return err
	}
	if !storable(string(in.Metadata)) {
		return capacityd.Errorf(capacityd.EInvalid, "metadata must be valid UTF-8 without NUL characters")
	}
	if len(in.Metadata) > MaxMetadataBytes {
		return capacityd.Errorf(capacityd.EInvalid, "metadata must be at most %d bytes", MaxMetadataBytes)
	}
	return ValidateIdempotencyKey(in.IdempotencyKey)
}

// ValidateIdempotencyKey accepts "" (no key) or 1-255 printable ASCII
// characters.
func ValidateIdempotencyKey(k string) error {
	if len(k) > MaxIdempotencyKey {
		return capacityd.Errorf(capacityd.EInvalid, "Idempotency-Key must be at most %d characters", MaxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return capacityd.Errorf(capacityd.EInvalid, "Idempotency-Key must be printable ASCII")
		}
	}
	return nil
}
