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
}

// FullSizes are the sizes of make bench.
var FullSizes = Sizes{
	FlashCrowdUsers: 20000, CountedSignups: deadTupleUpdates, SSEClients: 1000,
}

// withDefaults fills the zero sizes from FullSizes.
func (s Sizes) withDefaults() Sizes {
	f := FullSizes
	s.FlashCrowdUsers = cmp.Or(s.FlashCrowdUsers, f.FlashCrowdUsers)
	s.CountedSignups = cmp.Or(s.CountedSignups, f.CountedSignups)
	s.SSEClients = cmp.Or(s.SSEClients, f.SSEClients)
	return s
}

// sizeNote says, for a scenario's note, that it ran smaller than in make
// bench (empty when it did not).
func sizeNote(what string, got, full int) string {
	if got == full {
		return ""
	}
	return fmt.Sprintf("%d %s instead of %d (a smaller run)", got, what, full)
}
