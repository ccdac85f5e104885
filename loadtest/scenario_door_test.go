package loadtest

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
)

func TestPlanDoorScans(t *testing.T) {
	t.Parallel()
	const tickets, devices = 1000, 16
	plan := planDoorScans(rand.New(rand.NewPCG(5, 6)), tickets, 10, devices)
	require.Len(t, plan, 1100, "every ticket once, 10% twice")
	scans := make([]int, tickets)
	firstAt := make([]int, tickets)
	for k, s := range plan {
		require.GreaterOrEqual(t, s.device, 0)
		require.Less(t, s.device, devices)
		scans[s.ticket]++
		switch scans[s.ticket] {
		case 1:
			firstAt[s.ticket] = s.device
			require.Equal(t, k%devices, s.device, "scan %d at device k mod 16", k)
		case 2:
			require.NotEqual(t, firstAt[s.ticket], s.device, "ticket %d scanned again at the same device", s.ticket)
		}
	}
	twice := 0
	for tk, n := range scans {
		require.Contains(t, []int{1, 2}, n, "ticket %d", tk)
		if n == 2 {
			twice++
		}
	}
	require.Equal(t, 100, twice)
	require.Equal(t, plan, planDoorScans(rand.New(rand.NewPCG(5, 6)), tickets, 10, devices), "the same seed plans the same")
	require.Len(t, planDoorScans(rand.New(rand.NewPCG(1, 1)), 5, 0, 2), 5, "no duplicates")
}

// entered is the answer of a scan recorded as check-in seq.
func entered(seq int64) client.CheckinResult {
	return client.CheckinResult{Result: "entered", Checkin: &client.CheckIn{Seq: seq}}
}

func refused(code string) error {
	return &client.Error{Status: http.StatusConflict, Code: code}
}

// entryOf is check-in seq of registration reg, as the history has it.
func entryOf(seq int64, reg string) client.CheckIn {
	return client.CheckIn{Seq: seq, RegistrationID: reg, Type: client.ScanEntry, Seats: 1}
}

func TestDoorRunRecord(t *testing.T) {
	t.Parallel()
	r := newDoorRun(3)
	require.NoError(t, r.record(0, entered(1), nil))
	require.NoError(t, r.record(0, client.CheckinResult{}, refused(client.CodeAlreadyCheckedIn)))
	require.NoError(t, r.record(1, client.CheckinResult{}, refused(client.CodeRoomFull)))
	require.Error(t, r.record(2, client.CheckinResult{}, refused(client.CodeTicketRevoked)), "another refusal fails")
	require.Error(t, r.record(2, client.CheckinResult{}, &client.Error{Status: http.StatusServiceUnavailable}))
	require.Error(t, r.record(2, client.CheckinResult{}, errors.New("connection reset")))
	replay := entered(1)
	replay.Replayed = true
	require.ErrorContains(t, r.record(2, replay, nil), "replayed true", "every scan has a key of its own")
	require.ErrorContains(t, r.record(2, client.CheckinResult{Result: "exited", Checkin: &client.CheckIn{Seq: 2}}, nil), "exited")
	require.EqualValues(t, 1, r.entered.Load())
	require.EqualValues(t, 1, r.already.Load())
	require.EqualValues(t, 1, r.roomFull.Load())
	require.EqualValues(t, 5, r.other.Load())
	require.EqualValues(t, 1, r.answers.fivexx())
	require.EqualValues(t, 1, r.answers.count(0), "no answer")
	require.EqualValues(t, 1, r.seq[0].Load())
	require.True(t, r.refusedAlready[0].Load())

	require.NoError(t, r.record(0, entered(3), nil))
	require.EqualValues(t, 1, r.twice.Load(), "a ticket answered 200 twice")
	require.EqualValues(t, 1, r.seq[0].Load(), "its first seq is kept")
}

func TestDoorRunJudge(t *testing.T) {
	t.Parallel()
	regs := []string{"r0", "r1", "r2", "r3"}
	list := func(inside, checkedIn int) client.CheckinList {
		return client.CheckinList{Inside: inside, CheckedIn: checkedIn}
	}

	// Room for 2: r0 and r2 entered, r0 scanned again, r1 and r3 refused
	// as the room was full. Exact.
	r := newDoorRun(4)
	require.NoError(t, r.record(2, entered(1), nil))
	require.NoError(t, r.record(0, entered(2), nil))
	require.NoError(t, r.record(0, client.CheckinResult{}, refused(client.CodeAlreadyCheckedIn)))
	require.NoError(t, r.record(1, client.CheckinResult{}, refused(client.CodeRoomFull)))
	require.NoError(t, r.record(3, client.CheckinResult{}, refused(client.CodeRoomFull)))
	history := []client.CheckIn{entryOf(1, "r2"), entryOf(2, "r0")}
	v := r.judge(regs, history, list(2, 2), 2)
	require.Equal(t, doorVerdict{entered: 2, history: 2, inside: 2, checkedIn: 2}, v)

	// The same answers with room for 3: the room never filled, so the two
	// room_full refusals are belied.
	v = r.judge(regs, history, list(2, 2), 3)
	require.EqualValues(t, 2, v.unjustified)
	require.Zero(t, v.overMax)

	// A history that lost r0's entry, recorded r3's that no scan was
	// answered 200 with, and a list whose counts are off and over the
	// room: r0 was refused as already checked in with no entry.
	bad := []client.CheckIn{entryOf(1, "r2"), entryOf(2, "r3")}
	v = r.judge(regs, bad, list(3, 1), 2)
	require.EqualValues(t, 2, v.mismatched, "r0's 200 not in the history at 2; r3's check-in without a 200")
	require.EqualValues(t, 1, v.unjustified, "r0 refused as already checked in")
	require.EqualValues(t, 1, v.overMax)
	require.EqualValues(t, 1+1, v.insideOff, "inside 3 and checked_in 1 for 2 entries")

	// Two entries of one registration, a gap in the seqs, a forced
	// check-in, an exit and an unknown registration.
	forced := entryOf(4, "r2")
	forced.Forced = true
	exit := entryOf(5, "r1")
	exit.Type = client.ScanExit
	odd := []client.CheckIn{entryOf(1, "r2"), entryOf(2, "r0"), entryOf(2, "r0"), forced, exit, entryOf(6, "rx")}
	v = r.judge(regs, odd, list(2, 2), 2)
	require.EqualValues(t, 2, v.enteredTwice, "r0 and r2 entered twice")
	require.EqualValues(t, 4, v.mismatched, "the repeated seq 2, the forced one, the exit and rx")

	// A ticket answered 200 twice counts as entered twice.
	r2 := newDoorRun(1)
	require.NoError(t, r2.record(0, entered(1), nil))
	require.NoError(t, r2.record(0, entered(2), nil))
	v = r2.judge([]string{"r0"}, []client.CheckIn{entryOf(1, "r0"), entryOf(2, "r0")}, list(2, 1), 5)
	require.EqualValues(t, 2, v.enteredTwice, "answered twice, and twice in the history")

	var sum doorVerdict
	sum.add(doorVerdict{entered: 7, enteredTwice: 1, overMax: 2, insideOff: 3, mismatched: 4, unjustified: 5})
	sum.add(doorVerdict{enteredTwice: 1, overMax: 1, insideOff: 1, mismatched: 1, unjustified: 1})
	require.Equal(t, doorVerdict{enteredTwice: 2, overMax: 3, insideOff: 4, mismatched: 5, unjustified: 6}, sum, "violations add, counts do not")
}

func TestJudgeSync(t *testing.T) {
	t.Parallel()
	regs := []string{"r0", "r1", "r2"}
	history := []client.CheckIn{entryOf(1, "r1")}
	item := func(id string, valid, inside bool, entries int) client.TicketSyncItem {
		return client.TicketSyncItem{RegistrationID: id, Valid: valid, Inside: inside, Entries: entries}
	}
	s := judgeSync(regs, history, []client.TicketSyncItem{item("r0", true, false, 0), item("r1", true, true, 1), item("r2", true, false, 0)})
	require.Equal(t, doorSync{tickets: 3}, s)

	s = judgeSync(regs, history, []client.TicketSyncItem{
		item("r0", false, false, 0), // not valid
		item("r1", true, false, 1),  // entered, not inside
		item("r1", true, true, 1),   // named twice
		item("rx", true, false, 0),  // not of the crowd
	})
	require.Equal(t, doorSync{tickets: 2, extra: 2, inexact: 2}, s, "r2 missing")
}

func TestConfigSkip(t *testing.T) {
	t.Parallel()
	require.True(t, Config{}.wants(ScenarioDoorRush))
	require.False(t, Config{Skip: QuickSkips}.wants(ScenarioDoorRush))
	require.True(t, Config{Skip: QuickSkips}.wants(ScenarioSignupHot))
	require.False(t, Config{Only: []string{ScenarioSignupHot}}.wants(ScenarioDoorRush))
	require.True(t, Config{Only: []string{ScenarioDoorRush}}.wants(ScenarioDoorRush))
}
