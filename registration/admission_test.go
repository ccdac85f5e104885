package registration_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/registration"
)

// TestAdmitServesTheLineFirst pins the admission rule: a seat only when
// one is free and nobody waits; else the line when the activity keeps one;
// else a refusal.
func TestAdmitServesTheLineFirst(t *testing.T) {
	t.Parallel()
	seat, line, full := registration.AdmitSeat, registration.AdmitWaitlist, registration.AdmitFull
	for _, c := range []struct {
		name string
		in   registration.Counts
		want registration.Admission
	}{
		{"several free", registration.Counts{Capacity: 5, Taken: 2}, seat},
		{"one free", registration.Counts{Capacity: 5, Taken: 4}, seat},
		{"one free, list kept", registration.Counts{Capacity: 5, Taken: 4, Waitlist: true}, seat},
		{"none free", registration.Counts{Capacity: 5, Taken: 5}, full},
		{"none free, list kept", registration.Counts{Capacity: 5, Taken: 5, Waitlist: true}, line},
		{"over capacity", registration.Counts{Capacity: 5, Taken: 7}, full},
		{"over capacity, list kept", registration.Counts{Capacity: 5, Taken: 7, Waitlist: true}, line},
		{"free but someone waits", registration.Counts{Capacity: 5, Taken: 2, Waiting: 1}, full},
		{"free but someone waits, list kept", registration.Counts{Capacity: 5, Taken: 2, Waiting: 1, Waitlist: true}, line},
		{"capacity 0", registration.Counts{}, full},
		{"capacity 0, list kept", registration.Counts{Waitlist: true}, line},
	} {
		require.Equal(t, c.want, registration.Admit(c.in), c.name)
	}
}
