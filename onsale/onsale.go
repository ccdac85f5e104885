// Package onsale is the admission queue of an activity's on-sale: users
// join a line, everyone who joined before the activity opens is put in a
// uniformly random order at its opening, and places are admitted in
// position order at a bounded rate, each with a single-use admission
// token that a signup must carry. The admission rule is DecideAdvance, a
// pure function: no more tokens out than the cap and, without a waiting
// list, than the seats a signup could still get.
//
// PostgreSQL keeps positions and tokens (the Authority); every instance
// runs the admission controller (Controller.Run), which advances each
// line under its row's lock with SKIP LOCKED, so no leader is needed and
// no place is admitted twice. Polls of a ticket are answered from this
// instance's memory: the line's state, refreshed by the controller a few
// times a second, and the ticket as last read, read again only when the
// line's state says it may have changed.
package onsale

import (
	"context"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

// State is where a place in a line stands.
type State string

// The states of a place.
const (
	Waiting  State = "waiting"
	Admitted State = "admitted"
	Used     State = "used"
	Expired  State = "expired"
	SoldOut  State = "sold_out"
)

// Place is a user's place in an activity's line, as the authority keeps it.
type Place struct {
	ActivityID string
	UserID     string
	State      State
	// Position is fixed once given (1 = first); nil for a place taken
	// before the activity opened, until the opening's shuffle.
	Position *int64
	// Token and TokenExpiresAt are set once the place is admitted.
	Token          *string
	TokenExpiresAt *time.Time
	JoinedAt       time.Time
}

// Line is the state of an activity's line after its last advance.
type Line struct {
	ActivityID string
	Settings   registration.QueueSettings
	OpensAt    *time.Time
	// Shuffled is whether the places taken before the opening have their
	// positions.
	Shuffled bool
	// Head is the first waiting position (nil: nobody waits with a
	// position); Waiting the places waiting.
	Head    *int64
	Waiting int64
	// AdmittedThrough is the highest position admitted so far.
	AdmittedThrough int64
	// SoldOut is set once the activity filled up without a waiting list.
	SoldOut bool
	// TokensOut is the admitted places whose tokens are unused and live;
	// Used the places whose tokens made a registration.
	TokensOut, Used int64
	// AsOf is when the line was advanced.
	AsOf time.Time
}

// Advance is what one advance of a line did.
type Advance struct {
	Line Line
	// Locked is false when another instance was advancing the line: Line
	// is then as that instance last left it.
	Locked bool
	// Admitted, Lapsed and TokensExpired count the places the advance
	// admitted, found absent, and whose tokens it found expired.
	Admitted, Lapsed, TokensExpired int
}

// Authority keeps the lines and places.
type Authority interface {
	// JoinQueue returns the user's place in the activity's line, taking
	// one at the end when the user holds none that is not expired. It
	// fails with not_found for an unknown activity, invalid_request for
	// one without a queue, and registration_closed after it closed.
	JoinQueue(ctx context.Context, activityID, userID string) (Place, error)
	// QueuePlace returns the user's latest place in the activity's line
	// and whether there is one.
	QueuePlace(ctx context.Context, activityID, userID string) (Place, bool, error)
	// QueuePlaces returns the latest places of the users in the
	// activity's line (users without one are left out).
	QueuePlaces(ctx context.Context, activityID string, users []string) ([]Place, error)
	// QueueLine returns the state of the activity's line as last advanced,
	// and whether it has one.
	QueueLine(ctx context.Context, activityID string) (Line, bool, error)
	// AdvanceQueue advances the activity's line at the database's clock,
	// unless another instance holds it: it shuffles the places taken
	// before the opening (once, with shuffle), gives positions to places
	// without one, lapses absent places and expired tokens, marks the
	// waiting places sold out when the activity is full without a
	// waiting list, and admits places in position order as
	// DecideAdvance decides (the rate, the cap and, without a waiting
	// list, the seats).
	AdvanceQueue(ctx context.Context, activityID string, shuffle func(n int) []int) (Advance, error)
	// ActiveQueues returns the activities whose lines may need advancing.
	ActiveQueues(ctx context.Context) ([]string, error)
	// TouchPlaces records that the users asked about their waiting places.
	TouchPlaces(ctx context.Context, activityID string, users []string) error
}
