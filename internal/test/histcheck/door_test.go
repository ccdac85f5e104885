package histcheck_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/histcheck"
)

// doorFixture is a list of max_inside 2 with two seated registrations that
// both entered, one of them left, and a forced duplicate entry.
func doorFixture() histcheck.DoorList {
	two := 2
	h := []histcheck.DoorCheckIn{
		{Seq: 1, RegistrationID: "r_a", Type: "entry", Seats: 1},
		{Seq: 2, RegistrationID: "r_b", Type: "entry", Seats: 1},
		{Seq: 3, RegistrationID: "r_a", Type: "exit", Seats: 1},
		{Seq: 4, RegistrationID: "r_b", Type: "entry", Seats: 1, Forced: true, Conflict: "already_checked_in"},
	}
	return histcheck.DoorList{ID: "cl_1", Entry: "once", MaxInside: &two, CheckedIn: 2, Inside: 1, Conflicts: 1,
		AnswersComplete: true, History: h, Answers: h,
		Events: [][]histcheck.DoorEvent{{
			{Seq: 1, RegistrationID: "r_a", Type: "registration.created", To: "pending"},
			{Seq: 2, RegistrationID: "r_b", Type: "registration.created", To: "pending"},
			{Seq: 3, RegistrationID: "r_a", Type: "registration.checked_in", To: "pending", ListID: "cl_1"},
			{Seq: 4, RegistrationID: "r_b", Type: "registration.checked_in", To: "pending", ListID: "cl_1"},
			{Seq: 5, RegistrationID: "r_a", Type: "registration.checked_out", To: "pending", ListID: "cl_1"},
			{Seq: 6, RegistrationID: "r_b", Type: "registration.checked_in", To: "pending", ListID: "cl_1", Forced: true},
		}}}
}

func TestDoorCheckPassesAnExactList(t *testing.T) {
	v := histcheck.CheckDoor(doorFixture())
	assert.True(t, v.OK(), "%v", v.Violations)
}

// TestDoorCheckCatchesEachBrokenRule breaks each promise of a list in turn
// (as a broken door rule would) and requires the check to say which.
func TestDoorCheckCatchesEachBrokenRule(t *testing.T) {
	for name, tc := range map[string]struct {
		broken func(*histcheck.DoorList)
		want   string
	}{
		"a second accepted entry on a once list": {func(l *histcheck.DoorList) {
			l.History[3].Forced, l.History[3].Conflict = false, ""
			l.Answers = l.History
			l.Conflicts = 0
			l.Events[0][5].Forced = false
		}, "entered again on a once list"},
		"the room over its limit": {func(l *histcheck.DoorList) {
			one := 1
			l.MaxInside = &one
		}, "pass max_inside"},
		"an entry of a cancelled registration": {func(l *histcheck.DoorList) {
			l.Events[0][1].To = "cancelled"
		}, "held no seat"},
		"an answer the history lost": {func(l *histcheck.DoorList) {
			l.History = l.History[:3]
			l.Conflicts = 0
		}, "not in the history"},
		"a gap in the history": {func(l *histcheck.DoorList) {
			l.History[2].Seq = 7
		}, "a gap or a reorder"},
		"counts that differ from the history": {func(l *histcheck.DoorList) {
			l.Inside = 2
		}, "the list counts"},
		"a recorded check-in nobody was answered": {func(l *histcheck.DoorList) {
			l.Answers = l.Answers[:3]
		}, "never answered"},
		"a forced conflict not counted": {func(l *histcheck.DoorList) {
			l.Conflicts = 0
		}, "the list counts"},
	} {
		t.Run(name, func(t *testing.T) {
			l := doorFixture()
			l.History = append([]histcheck.DoorCheckIn(nil), l.History...)
			l.Events = [][]histcheck.DoorEvent{append([]histcheck.DoorEvent(nil), l.Events[0]...)}
			tc.broken(&l)
			v := histcheck.CheckDoor(l)
			require.False(t, v.OK())
			assert.True(t, strings.Contains(strings.Join(v.Violations, "\n"), tc.want), "%v", v.Violations)
		})
	}
}
