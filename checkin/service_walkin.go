package checkin

import (
	"context"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// WalkIn signs a user up for an activity of the list at the door, skipping
// its admission queue, and checks them in at once when they got a seat
// (answer "entered"); a waitlisted walk-in is the standby line at the
// door (answer "waitlisted", no check-in).
func (s *Service) WalkIn(ctx context.Context, listID string, in WalkInInput, c registration.Caller) (Answer, error) {
	if err := in.Validate(); err != nil {
		return Answer{}, err
	}
	l, err := s.GetList(ctx, listID, c)
	if err != nil {
		return Answer{}, err
	}
	if !l.Has(in.ActivityID) {
		return Answer{}, capacityd.Errorf(capacityd.EWrongList, "activity %s is not on check-in list %s", safe(in.ActivityID), l.ID)
	}
	door := c
	reg, _, err := s.cfg.Registrations.Signup(ctx, registration.SignupInput{ActivityID: in.ActivityID,
		Caller: registration.Caller{UserID: in.UserID, RequestID: c.RequestID}, Metadata: []byte("{}"), Seats: in.Seats, Door: &door})
	if err != nil {
		return Answer{}, err
	}
	if !reg.Status.Occupying() {
		return Answer{Result: "waitlisted", Registration: reg, Inside: l.Inside, MaxInside: l.MaxInside}, nil
	}
	out, err := s.Redeem(ctx, listID, RedeemInput{RegistrationID: reg.ID, Type: TypeEntry, Device: in.Device}, c)
	if err != nil {
		return Answer{}, err
	}
	return out.Answer(), nil
}

// WalkInInput is a walk-in's request.
type WalkInInput struct {
	ActivityID string
	UserID     string
	Seats      int
	Device     string
}

// Validate checks the request and fills its defaults.
func (in *WalkInInput) Validate() error {
	if in.Seats == 0 {
		in.Seats = 1
	}
	if in.Device == "" {
		in.Device = "walk-in"
	}
	if in.ActivityID == "" {
		return capacityd.Errorf(capacityd.EInvalid, "activity_id is required")
	}
	if !registration.ValidUserIDLength(in.UserID) {
		return capacityd.Errorf(capacityd.EInvalid, "user_id must be 1 to %d characters", registration.MaxUserIDLen)
	}
	if in.Seats < 1 || in.Seats > registration.MaxSeatsLimit {
		return capacityd.Errorf(capacityd.EInvalid, "seats must be between 1 and the activity's max_seats_per_registration")
	}
	return ValidDevice(in.Device)
}
