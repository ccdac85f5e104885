package registration

import (
	"context"
	"errors"
)

// DueRelease is an activity whose release moment has come: the rule
// (Reason: CancelUnconfirmed at confirm_by, CancelNoShow at the door) and
// the registrations it would release as read before the transaction.
type DueRelease struct {
	ActivityID      string
	Reason          CancelReason
	RegistrationIDs []string
}

// releaseChunk bounds the registrations one release command names: a
// release of many seats takes a few transactions, not one per seat.
const releaseChunk = 500

// dueReleaseClaim bounds the activities one pass of the due-work loop
// claims.
const dueReleaseClaim = 20

// ReleaseDue runs the releases whose moment has come: for each claimed
// activity, release commands on its queue (checked again under its lock,
// promoting the line in the same transaction), then the release is
// recorded as done. It returns how many activities it released.
func (s *Service) ReleaseDue(ctx context.Context) (int, error) {
	due, err := s.store.ClaimDueReleases(ctx, s.now(), dueReleaseClaim)
	if err != nil {
		return 0, err
	}
	var errs []error
	done := 0
	for _, d := range due {
		if err := s.release(ctx, d); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := s.store.ReleaseDone(ctx, d.ActivityID, d.Reason); err != nil {
			errs = append(errs, err)
			continue
		}
		done++
	}
	return done, errors.Join(errs...)
}

// release submits an activity's release in chunks.
func (s *Service) release(ctx context.Context, d DueRelease) error {
	o := Origin{Actor: ActorSystem}
	for ids := d.RegistrationIDs; len(ids) > 0; {
		n := min(len(ids), releaseChunk)
		out, err := s.submit(ctx, d.ActivityID, ReleaseCommand{Origin: o, Reason: d.Reason, RegistrationIDs: ids[:n]})
		if err != nil {
			return err
		}
		if out.Err != nil {
			return out.Err
		}
		ids = ids[n:]
	}
	return nil
}

// Confirm confirms a registration its owner or an admin may see: see
// ConfirmCommand. A confirmed one is returned unchanged.
func (s *Service) Confirm(ctx context.Context, id string, c Caller) (Registration, error) {
	if err := validateCaller(c); err != nil {
		return Registration{}, err
	}
	r, err := s.GetRegistration(ctx, id, c)
	if err != nil {
		return r, err
	}
	return s.changeOf(ctx, r, ConfirmCommand{Origin: c.origin(), RegistrationID: id, Caller: c})
}
