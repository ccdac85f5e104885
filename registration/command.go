package registration

import (
	"encoding/json"
	"time"
)

// Caller is who makes a request, and which request it is.
type Caller struct {
	UserID string
	Admin  bool
	// Roles are the token's roles (a block for a role serves its members).
	Roles []string
	// RequestID is recorded on the events the request causes.
	RequestID string
}

// Actor is the caller as events record it: "admin:<sub>" when the token
// carries the admin role, "user:<sub>" otherwise.
func (c Caller) Actor() string {
	if c.Admin {
		return "admin:" + c.UserID
	}
	return "user:" + c.UserID
}

// origin is the caller as its commands' events record it. A request id
// that is not well-formed is never recorded (the HTTP layer replaces it
// with one of its own before it gets here).
func (c Caller) origin() Origin {
	o := Origin{Actor: c.Actor()}
	if ValidRequestID(c.RequestID) {
		o.RequestID = c.RequestID
	}
	return o
}

// Origin is who asked for a change and in which request; it is recorded on
// the change's events.
type Origin struct {
	Actor     string
	RequestID string
}

// Command is one change of an activity's seats or registrations. Every
// change is a command: it waits on its activity's queue and is applied with
// the other commands of the queue in one transaction, by Decide. The
// concrete types are SignupCommand, CancelCommand, StatusCommand,
// ExpireCommand, SeatsCommand and ActivityCommand.
type Command interface {
	origin() Origin
}

// SignupCommand asks for a seat, or a place on the waiting list, for a user.
type SignupCommand struct {
	Origin
	// RegistrationID is the public id the registration gets if one is made.
	RegistrationID string
	UserID         string
	Metadata       json.RawMessage
	// Seats is how many seats the signup asks for, all or nothing (0
	// reads as 1).
	Seats int
	// IdempotencyKey is empty when the client sent none; RequestHash
	// identifies the request body for idempotency conflicts.
	IdempotencyKey string
	RequestHash    []byte
	// Code is the block code the signup carries ("" for none), Roles the
	// roles of its token: a block of the activity for either serves it
	// first (see Block).
	Code  string
	Roles []string
	// AdmissionToken is the token of the user's admitted place in the
	// activity's admission queue ("" for none).
	AdmissionToken string
	// WalkIn is a signup made at a door by its staff: it needs no
	// admission token.
	WalkIn bool
	// Hold is the seat the display tier holds for the signup while it is in
	// flight; it is given back after the transaction, whatever its outcome.
	Hold Hold
}

// CancelCommand cancels a registration on behalf of its owner or an admin.
type CancelCommand struct {
	Origin
	RegistrationID string
	Caller         Caller
}

// StatusCommand moves a registration to awaiting_payment or approved (an
// admin's request).
type StatusCommand struct {
	Origin
	RegistrationID string
	To             Status
}

// ExpireCommand expires an awaiting_payment registration whose hold has run
// out (the expiry worker's request).
type ExpireCommand struct {
	Origin
	RegistrationID string
}

// SeatsCommand gives some of a registration's seats back (its owner's or
// an admin's request): Seats is how many it keeps, never more than it
// holds.
type SeatsCommand struct {
	Origin
	RegistrationID string
	Caller         Caller
	Seats          int
}

// ConfirmCommand confirms that the owner of a registration that holds a
// seat will come (its owner's or an admin's request).
type ConfirmCommand struct {
	Origin
	RegistrationID string
	Caller         Caller
}

// ReleaseCommand gives back the seats of the named registrations that a
// rule of the activity releases at its moment (the due-work loop's
// request): those still holding a seat and still unconfirmed (Reason
// CancelUnconfirmed) or with no accepted entry (CancelNoShow), checked
// again under the activity's lock. The freed seats promote the waiting
// list in the same transaction.
type ReleaseCommand struct {
	Origin
	Reason          CancelReason
	RegistrationIDs []string
}

// ActivityCommand changes an activity (an admin's request).
type ActivityCommand struct {
	Origin
	Patch ActivityPatch
}

func (c SignupCommand) origin() Origin   { return c.Origin }
func (c CancelCommand) origin() Origin   { return c.Origin }
func (c StatusCommand) origin() Origin   { return c.Origin }
func (c ExpireCommand) origin() Origin   { return c.Origin }
func (c ActivityCommand) origin() Origin { return c.Origin }
func (c SeatsCommand) origin() Origin    { return c.Origin }
func (c ConfirmCommand) origin() Origin  { return c.Origin }
func (c ReleaseCommand) origin() Origin  { return c.Origin }

// Outcome is what one command did.
type Outcome struct {
	// Registration is the registration the command made, changed or
	// found unchanged (nil for an ActivityCommand or a refusal).
	Registration *Registration
	// Activity is the activity after an ActivityCommand.
	Activity *Activity
	// Pool is the pool after a PoolCommand.
	Pool *Pool
	// Block is the block a BlockCreate made.
	Block *Block
	// Err is a *capacityd.Error when the command was refused.
	Err error
	// Replayed is true when the outcome is the stored first outcome of the
	// same Idempotency-Key.
	Replayed bool
	// Changed is true when the command changed something (it recorded at
	// least one event or changed the activity).
	Changed bool
}

// CommandBatch is the queued commands of one activity, in queue order;
// or, when ActivityID is a pool's id (p_…), the PoolCommands of that pool.
type CommandBatch struct {
	ActivityID string
	Commands   []Command
}

// IsPool reports whether the batch holds a pool's commands.
func (b CommandBatch) IsPool() bool { return IsPoolID(b.ActivityID) }

// IsPoolID reports whether id names a pool rather than an activity.
func IsPoolID(id string) bool { return len(id) > 2 && id[:2] == "p_" }

// Applied is what one activity's commands did in a transaction: the plan
// that was committed, or the error that refused the whole batch (an
// activity that does not exist). The plan of a pool's batch has the
// commands' outcomes and the pool's state (Plan.Pools) alone.
type Applied struct {
	Plan Plan
	Err  error
}

// Hold is seats held in the display tier for a signup in flight. The zero
// Hold holds nothing.
type Hold struct {
	// Gen identifies the hold in the display counters it was taken in
	// (the activity's and its pools'): it is given back only while still
	// held there (not past its deadline, not in a counter rebuilt since).
	Gen string
	// Seats is how many seats are held (0 reads as 1).
	Seats int
	// Pools are the same seats held in the display counters of the
	// activity's pools.
	Pools []PoolHold
}

// PoolHold is seats held in a pool's display counter for a signup in
// flight, identified there by Gen.
type PoolHold struct {
	PoolID string
	Gen    string
	Seats  int
}

// Count returns the seats h holds.
func (h Hold) Count() int {
	if !h.Held() {
		return 0
	}
	return max(h.Seats, 1)
}

// Held reports whether h holds a seat.
func (h Hold) Held() bool { return h.Gen != "" }

// Commit tells observers what one activity's part of a transaction
// changed, after the commit (or that it failed).
type Commit struct {
	// ActivityID is the activity whose part this is; "" for a pool's own
	// change (a PoolCommand), which has only Pools.
	ActivityID string
	// Failed is true when the transaction did not commit: nothing changed,
	// and only Holds are to be given back.
	Failed bool
	// Events are the events the commit recorded, in seq order.
	Events []Event
	// State is the activity's seat state right after the commit.
	State SeatState
	// ActivityChanged is true when the commit changed the activity's
	// capacity or waiting-list setting.
	ActivityChanged bool
	// Holds are the display holds of the batch's signups, to give back.
	Holds []Hold
	// Pools are the states of the activity's pools right after the commit
	// (a change in one activity of a pool moves the display of all of
	// them); nil for a failed transaction.
	Pools []PoolSeatState
}

// SeatState is an activity's seats at one moment of the authority: as of
// its event LastSeq, and of its settings (Capacity, Waitlist) as of
// UpdatedAt, which every change of the settings moves forward.
type SeatState struct {
	Capacity int
	Waitlist bool
	Policy   WaitlistPolicy
	Taken    int
	// Reserved is the unused seats of the activity's blocks.
	Reserved  int
	Waiting   int
	LastSeq   int64
	UpdatedAt time.Time
	// Pools are the states of the activity's pools in the same snapshot.
	Pools []PoolSeatState
}

// Remaining is what a new signup could get: the activity's own free
// seats, or fewer when one of its pools has fewer left.
func (s SeatState) Remaining() int { return s.Counts().Remaining() }

// Counts returns the state's counts, for Admit (with Counts.For the seats
// a signup asks for).
func (s SeatState) Counts() Counts {
	own := Room{Capacity: s.Capacity, Taken: s.Taken, Reserved: s.Reserved}
	return NewCounts(own, s.Waiting, s.Waitlist, s.Policy, s.Pools)
}

// DueHold is an awaiting_payment registration whose hold has run out.
type DueHold struct {
	RegistrationID string
	ActivityID     string
}

// FullCheck asks whether an activity is full for a set of users at one
// snapshot of the authority.
type FullCheck struct {
	ActivityID string
	UserIDs    []string
}

// FullAnswer is the authority's answer to a FullCheck, all read at one
// snapshot: the counts (not a verdict: the Service applies Admit to them)
// and the users who already hold a place.
type FullAnswer struct {
	// Capacity is the activity's capacity, Taken the seats of its
	// occupying registrations, Reserved the unused seats of its blocks,
	// Waiting the length of its waiting list.
	Capacity, Taken, Reserved, Waiting int
	// Waitlist is the activity's waiting-list setting, Policy its policy,
	// MaxSeats its max_seats_per_registration.
	Waitlist bool
	Policy   WaitlistPolicy
	MaxSeats int
	// Pools are the rooms of the activity's pools, in the same snapshot.
	Pools []Room
	// Holders maps the users that hold an active registration of the
	// activity to its id.
	Holders map[string]string
}

// Counts returns the answer's counts, for Admit (with Counts.For the
// seats a signup asks for).
func (a FullAnswer) Counts() Counts {
	own := Room{Capacity: a.Capacity, Taken: a.Taken, Reserved: a.Reserved}
	return NewCounts(own, a.Waiting, a.Waitlist, a.Policy, a.Pools)
}
