package checkin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// seatChanges answers ChangedWithin with itself.
type seatChanges bool

func (b seatChanges) ChangedWithin(time.Duration) bool { return bool(b) }

func TestABusyListYieldsToSeatChangesOnly(t *testing.T) {
	t.Parallel()
	busy := NewService(Config{SeatChanges: seatChanges(true)})
	require.Equal(t, yieldFactor*time.Millisecond, busy.rest(time.Millisecond), "yieldFactor times the transaction's time")
	require.Equal(t, yieldMax, busy.rest(time.Second), "at most yieldMax")

	require.Zero(t, NewService(Config{SeatChanges: seatChanges(false)}).rest(time.Millisecond), "no seat change lately: no wait")
	require.Zero(t, NewService(Config{}).rest(time.Millisecond), "without SeatChanges a list never yields")
}
