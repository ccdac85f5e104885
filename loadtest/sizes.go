package loadtest

import (
	"cmp"
	"fmt"
)

// Sizes are the sizes of the scenarios that run a fixed number of
// operations. Zero fields take FullSizes'.
type Sizes struct {
	// FlashCrowdUsers sign up once each for flash_crowd's 500 seats.
	FlashCrowdUsers int
	// CountedSignups is the number of signups (and of hot-row updates)
	// whose dead tuples are counted.
	CountedSignups int
	// SSEClients is the number of seat streams sse_fanout opens.
	SSEClients int
	// WaitlistCrowdUsers sign up once each for flash_crowd_waitlist's 500
	// seats.
	WaitlistCrowdUsers int
	// PromoteCancels is the seats of each of promote_storm's
	// PromoteRounds storms, all cancelled while PromoteWaiting users wait.
	PromoteCancels int
	PromoteWaiting int
	PromoteRounds  int
	// CourseActivities of courseSeats seats each, and CourseUsers who
	// each sign up for courseChoices of them at once: course_rush.
	CourseActivities int
	CourseUsers      int
	// GroupActivities and GroupUsers are group_rush's: course_rush's
	// shape, each user with a party of 1 to groupMaxParty seats.
	GroupActivities int
	GroupUsers      int
	// PoolPools and PoolUsers are pool_rush's: PoolPools pools of
	// poolSeats seats, each shared by poolActivities activities of
	// poolActivitySeats seats (some of them in a second pool too), and
	// PoolUsers who each sign up for courseChoices of the activities at
	// once.
	PoolPools int
	PoolUsers int
	// OnSaleUsers join onsale's queue before the opening.
	OnSaleUsers int
	// DoorTickets is door_rush's crowd: the registrations whose tickets
	// its devices scan.
	DoorTickets int
	// DoorDevices scan door_rush's tickets at once, each scanning again
	// as soon as it is answered.
	DoorDevices int
	// ReleaseActivities are release_storm's activities, each of
	// releaseSeats seats with releaseNoShows no-shows and releaseWaiting
	// waiting.
	ReleaseActivities int
	// Dashboards are the dashboards scenario's open dashboards.
	Dashboards int
}

// FullSizes are the sizes of make bench.
var FullSizes = Sizes{
	FlashCrowdUsers: 20000, CountedSignups: deadTupleUpdates, SSEClients: 1000,
	WaitlistCrowdUsers: 20000, PromoteCancels: 1000, PromoteWaiting: 5000, PromoteRounds: 5,
	CourseActivities: 300, CourseUsers: 20000, GroupActivities: 300, GroupUsers: 20000,
	PoolPools: 100, PoolUsers: 20000, OnSaleUsers: 50000, DoorTickets: 10000, DoorDevices: 16, ReleaseActivities: 20,
	Dashboards: 200,
}

// QuickSizes are the sizes of make bench-quick: the waiting-list crowd and
// the course, group and pool rushes are smaller, the rest as in make bench.
var QuickSizes = Sizes{WaitlistCrowdUsers: 5000, CourseActivities: 100, CourseUsers: 5000,
	GroupActivities: 100, GroupUsers: 5000, PoolPools: 34, PoolUsers: 5000, OnSaleUsers: 5000}.withDefaults()

// withDefaults fills the zero sizes from FullSizes.
func (s Sizes) withDefaults() Sizes {
	f := FullSizes
	s.FlashCrowdUsers = cmp.Or(s.FlashCrowdUsers, f.FlashCrowdUsers)
	s.CountedSignups = cmp.Or(s.CountedSignups, f.CountedSignups)
	s.SSEClients = cmp.Or(s.SSEClients, f.SSEClients)
	s.WaitlistCrowdUsers = cmp.Or(s.WaitlistCrowdUsers, f.WaitlistCrowdUsers)
	s.PromoteCancels = cmp.Or(s.PromoteCancels, f.PromoteCancels)
	s.PromoteWaiting = cmp.Or(s.PromoteWaiting, f.PromoteWaiting)
	s.PromoteRounds = cmp.Or(s.PromoteRounds, f.PromoteRounds)
	s.CourseActivities = cmp.Or(s.CourseActivities, f.CourseActivities)
	s.CourseUsers = cmp.Or(s.CourseUsers, f.CourseUsers)
	s.GroupActivities = cmp.Or(s.GroupActivities, f.GroupActivities)
	s.GroupUsers = cmp.Or(s.GroupUsers, f.GroupUsers)
	s.PoolPools = cmp.Or(s.PoolPools, f.PoolPools)
	s.PoolUsers = cmp.Or(s.PoolUsers, f.PoolUsers)
	s.OnSaleUsers = cmp.Or(s.OnSaleUsers, f.OnSaleUsers)
	s.DoorTickets = cmp.Or(s.DoorTickets, f.DoorTickets)
	s.DoorDevices = cmp.Or(s.DoorDevices, f.DoorDevices)
	s.ReleaseActivities = cmp.Or(s.ReleaseActivities, f.ReleaseActivities)
	s.Dashboards = cmp.Or(s.Dashboards, f.Dashboards)
	return s
}

// The devices door_rush may run at: a ticket's second scan is at another
// device than its first, so at least two.
const (
	MinDoorDevices = 2
	MaxDoorDevices = 1000
)

// ValidateDoorDevices refuses a number of door_rush devices outside
// MinDoorDevices to MaxDoorDevices.
func ValidateDoorDevices(n int) error {
	if n < MinDoorDevices || n > MaxDoorDevices {
		return fmt.Errorf("door_rush runs at %d to %d devices (a ticket's second scan is at another device), not %d",
			MinDoorDevices, MaxDoorDevices, n)
	}
	return nil
}

// sizeNote says, for a scenario's note, that it ran at other sizes than in
// make bench: format has one %d per size, and each pair is a size as run
// and as in make bench. It is empty when every size is make bench's.
func sizeNote(format string, pairs ...[2]int) string {
	got, full := make([]any, len(pairs)), make([]any, len(pairs))
	smaller, larger := false, false
	for i, p := range pairs {
		got[i], full[i] = p[0], p[1]
		smaller = smaller || p[0] < p[1]
		larger = larger || p[0] > p[1]
	}
	kind := "a smaller run"
	switch {
	case !smaller && !larger:
		return ""
	case smaller && larger:
		kind = "another shape"
	case larger:
		kind = "a larger run"
	}
	return fmt.Sprintf(format, got...) + " instead of " + fmt.Sprintf(format, full...) + " (" + kind + ")"
}
