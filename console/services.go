package console

import (
	"context"

	"github.com/physiciansnet/capacityd/registration"
)

// Services are the domain services behind the console's pages. Each
// area's file declares what it asks of its service.
type Services struct {
	Activities    ActivityService
	Registrations RegistrationService
	Pools         PoolService
	OnSale        OnSaleService
	Webhooks      WebhookService
	Checkins      CheckinService
	Attendance    AttendanceService
	// Seats reads an activity's seats from the display tier, as the
	// public seat read does.
	Seats func(ctx context.Context, activityID string) (registration.Seats, error)
	// PoolSeats reads a pool's seats from the display tier.
	PoolSeats func(ctx context.Context, poolID string) (registration.PoolSeatState, string, error)
}
