package histcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// builder writes histories by hand: each attempt with explicit times.
type builder struct{ h history.History }

func (b *builder) add(kind history.Kind, in history.Input, call, ret int64, res history.Result, out history.Output) *builder {
	return b.attempt(len(b.h.Ops)+1, kind, in, call, ret, res, out)
}

func (b *builder) attempt(logical int, kind history.Kind, in history.Input, call, ret int64, res history.Result, out history.Output) *builder {
	b.h.Ops = append(b.h.Ops, history.Op{ID: len(b.h.Ops), Logical: logical, Kind: kind, Input: in,
		Call: call, Return: ret, Result: res, Output: out, Instance: "n0"})
	return b
}

const act = "a_1"

func created(b *builder, capacity int, waitlist bool) *builder {
	return b.add(history.CreateActivity, history.Input{Key: act, Capacity: capacity, Waitlist: waitlist, Users: 4}, 0, 1,
		history.Answered, history.Output{Status: 201, Capacity: capacity, Waitlist: waitlist})
}

func signup(u int) history.Input { return history.Input{Key: act, User: u, IdempotencyKey: "k"} }

func admitted(id string) history.Output {
	return history.Output{Status: 201, Registration: id, RegStatus: pending, Seats: 1}
}

func read(taken, waiting, capacity int, waitlist bool) history.Output {
	return history.Output{Status: 200, Capacity: capacity, Taken: taken, Waiting: waiting, Waitlist: waitlist}
}

var opts = Options{OrphanWindow: 5 * time.Second, FaultSlack: time.Second, Timeout: 10 * time.Second}

func TestSequentialHistoryIsLinearizable(t *testing.T) {
	b := created(&builder{}, 2, true)
	b.add(history.Signup, signup(0), 10, 20, history.Answered, admitted("r0"))
	b.add(history.Signup, signup(1), 30, 40, history.Answered, admitted("r1"))
	b.add(history.Signup, signup(2), 50, 60, history.Answered, history.Output{Status: 202, Registration: "r2", RegStatus: waitlisted, Seats: 1, Position: 1})
	b.add(history.Signup, signup(1), 61, 62, history.Answered, history.Output{Status: 409, Code: "already_registered", Registration: "r1"})
	b.add(history.ReadActivity, history.Input{Key: act}, 70, 80, history.Answered, read(2, 1, 2, true))
	b.add(history.SetStatus, history.Input{Key: act, User: 0, Registration: "r0", To: approved}, 81, 82, history.Answered,
		history.Output{Status: 200, Registration: "r0", RegStatus: approved, Seats: 1})
	b.add(history.SetStatus, history.Input{Key: act, User: 2, Registration: "r2", To: approved}, 83, 84, history.Answered,
		history.Output{Status: 409, Code: "invalid_transition"})
	// The cancel promotes u2: the line is empty again.
	b.add(history.Cancel, history.Input{Key: act, User: 0, Registration: "r0"}, 90, 100, history.Answered,
		history.Output{Status: 200, Registration: "r0", RegStatus: cancelled, Seats: 1})
	b.add(history.ReadActivity, history.Input{Key: act}, 110, 120, history.Answered, read(2, 0, 2, true))
	b.add(history.Cancel, history.Input{Key: act, User: 0, Registration: "r0"}, 121, 122, history.Answered,
		history.Output{Status: 200, Registration: "r0", RegStatus: cancelled, Seats: 1})
	b.add(history.SetCapacity, history.Input{Key: act, Capacity: 3}, 130, 140, history.Answered, read(2, 0, 3, true))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
	require.Equal(t, 1, r.Authority.Partitions)
}

func TestOversellIsCaught(t *testing.T) {
	b := created(&builder{}, 1, false)
	// Two concurrent signups both admitted to one seat.
	b.add(history.Signup, signup(0), 10, 30, history.Answered, admitted("r0"))
	b.add(history.Signup, signup(1), 15, 35, history.Answered, admitted("r1"))
	r := Check(b.h, opts)
	require.Equal(t, porcupine.Illegal, r.Authority.Result, "%s", r)
	require.Equal(t, []string{act}, r.Authority.Failed)
	w := r.Authority.Witness(act)
	require.Contains(t, w, "capacity 1, taken 1")
	require.Contains(t, w, "no order explains \"signup(u")
}

func TestFullRefusalWhileASeatIsFreeIsCaught(t *testing.T) {
	b := created(&builder{}, 2, false)
	b.add(history.Signup, signup(0), 10, 20, history.Answered, admitted("r0"))
	b.add(history.Signup, signup(1), 30, 40, history.Answered, history.Output{Status: 409, Code: "activity_full", Remaining: new(1)})
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result)
}

func TestStaleReadIsCaught(t *testing.T) {
	b := created(&builder{}, 2, false)
	b.add(history.Signup, signup(0), 10, 20, history.Answered, admitted("r0"))
	b.add(history.ReadActivity, history.Input{Key: act}, 30, 40, history.Answered, read(0, 0, 2, false))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result)
}

func TestWaitlistOrderIsChecked(t *testing.T) {
	b := created(&builder{}, 1, true)
	b.add(history.Signup, signup(0), 10, 20, history.Answered, admitted("r0"))
	b.add(history.Signup, signup(1), 30, 40, history.Answered, history.Output{Status: 202, Registration: "r1", RegStatus: waitlisted, Seats: 1, Position: 1})
	b.add(history.Signup, signup(2), 50, 60, history.Answered, history.Output{Status: 202, Registration: "r2", RegStatus: waitlisted, Seats: 1, Position: 2})
	b.add(history.Cancel, history.Input{Key: act, User: 0, Registration: "r0"}, 70, 80, history.Answered,
		history.Output{Status: 200, Registration: "r0", RegStatus: cancelled, Seats: 1})
	// u1 was first in line: cancelling u2's place must leave one seat
	// taken (u1's) and nobody waiting; u2 being promoted instead is caught.
	good := b.h
	good.Ops = append(good.Ops, history.Op{ID: 5, Logical: 100, Kind: history.SetStatus,
		Input: history.Input{Key: act, User: 1, Registration: "r1", To: approved}, Call: 90, Return: 100,
		Result: history.Answered, Output: history.Output{Status: 200, Registration: "r1", RegStatus: approved, Seats: 1}})
	require.True(t, Check(good, opts).OK())
	bad := b.h
	bad.Ops = append(bad.Ops, history.Op{ID: 5, Logical: 100, Kind: history.SetStatus,
		Input: history.Input{Key: act, User: 2, Registration: "r2", To: approved}, Call: 90, Return: 100,
		Result: history.Answered, Output: history.Output{Status: 200, Registration: "r2", RegStatus: approved, Seats: 1}})
	require.Equal(t, porcupine.Illegal, Check(bad, opts).Authority.Result)
}

func TestUnknownOutcomeMayOrMayNotHaveHappened(t *testing.T) {
	for _, taken := range []int{0, 1} {
		b := created(&builder{}, 2, false)
		b.add(history.Signup, signup(0), 10, 20, history.Unknown, history.Output{Error: "EOF"})
		b.add(history.ReadActivity, history.Input{Key: act}, 30, 40, history.Answered, read(taken, 0, 2, false))
		r := Check(b.h, opts)
		require.True(t, r.OK(), "taken %d: %s", taken, r)
		require.Equal(t, 1, r.Authority.Unknown)
	}
	// A third one is more than one signup could do.
	b := created(&builder{}, 2, false)
	b.add(history.Signup, signup(0), 10, 20, history.Unknown, history.Output{Error: "EOF"})
	b.add(history.ReadActivity, history.Input{Key: act}, 30, 40, history.Answered, read(2, 0, 2, false))
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Authority.Result)
}

func TestRetriesWithTheSameKeyAreOneOperation(t *testing.T) {
	b := created(&builder{}, 1, false)
	// The first attempt's answer was lost, a 503 said nothing was
	// written, the third replayed the outcome: one admission.
	b.attempt(50, history.Signup, signup(0), 10, 20, history.Unknown, history.Output{Error: "reset"})
	b.attempt(50, history.Signup, signup(0), 25, 30, history.Answered, history.Output{Status: 503, Code: "unavailable"})
	b.attempt(50, history.Signup, signup(0), 35, 40, history.Answered, admitted("r0"))
	b.add(history.ReadActivity, history.Input{Key: act}, 50, 60, history.Answered, read(1, 0, 1, false))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
	require.Equal(t, 2, r.Authority.Operations-1)
}

func TestAnUnknownSignupsIDIsLearnedFromARefusal(t *testing.T) {
	b := created(&builder{}, 2, false)
	b.add(history.Signup, signup(0), 10, 20, history.Unknown, history.Output{Error: "EOF"})
	b.add(history.Signup, signup(0), 30, 40, history.Answered, history.Output{Status: 409, Code: "already_registered", Registration: "r9"})
	b.add(history.Cancel, history.Input{Key: act, User: 0, Registration: "r9"}, 50, 60, history.Answered,
		history.Output{Status: 200, Registration: "r9", RegStatus: cancelled, Seats: 1})
	b.add(history.ReadActivity, history.Input{Key: act}, 70, 80, history.Answered, read(0, 0, 2, false))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)
}

func TestDisplayMayExceedTheAuthorityOnlyByHoldsInFlight(t *testing.T) {
	seats := func(taken int) history.Output {
		return history.Output{Status: 200, Taken: taken, Capacity: 3, Source: "cache"}
	}
	b := created(&builder{}, 3, false)
	b.add(history.Signup, signup(0), 10, 20, history.Answered, admitted("r0"))
	// One signup in flight during the read: one seat more is fine.
	b.add(history.Signup, signup(1), 30, 60, history.Answered, admitted("r1"))
	b.add(history.ReadSeats, history.Input{Key: act}, 40, 50, history.Answered, seats(2))
	r := Check(b.h, opts)
	require.True(t, r.OK(), "%s", r)

	// One more than the authority with none in flight is not.
	b.add(history.ReadSeats, history.Input{Key: act}, 21, 25, history.Answered, seats(2))
	r = Check(b.h, opts)
	require.Equal(t, porcupine.Ok, r.Authority.Result)
	require.Equal(t, porcupine.Illegal, r.Display.Result, "%s", r)

	// Unless a fault may have left a hold behind.
	b.h.Faults = []history.Fault{{Class: "redis_kill", Start: 5, End: 12}}
	require.True(t, Check(b.h, opts).OK())
}

func TestDisplayMayLagACancellationInFlight(t *testing.T) {
	b := created(&builder{}, 2, false)
	b.add(history.Signup, signup(0), 10, 20, history.Answered, admitted("r0"))
	// The seat is free at the authority, the display shows it taken until
	// the cancellation's commit reaches it.
	b.add(history.Cancel, history.Input{Key: act, User: 0, Registration: "r0"}, 30, 60, history.Answered,
		history.Output{Status: 200, Registration: "r0", RegStatus: cancelled, Seats: 1})
	b.add(history.ReadSeats, history.Input{Key: act}, 55, 58, history.Answered, history.Output{Status: 200, Taken: 1, Capacity: 2, Source: "cache"})
	require.True(t, Check(b.h, opts).OK())
	b.add(history.ReadSeats, history.Input{Key: act}, 65, 68, history.Answered, history.Output{Status: 200, Taken: 1, Capacity: 2, Source: "cache"})
	require.Equal(t, porcupine.Illegal, Check(b.h, opts).Display.Result)
}

func TestNoteCountersAreExact(t *testing.T) {
	note := history.Input{Key: "n1"}
	b := &builder{}
	b.add(history.NoteView, note, 0, 10, history.Answered, history.Output{Status: 200, Views: 1})
	b.add(history.NoteView, note, 5, 15, history.Unknown, history.Output{Error: "EOF"})
	b.add(history.NoteWater, note, 20, 30, history.Answered, history.Output{Status: 200, Views: 2, Waters: 1})
	b.add(history.NoteStats, note, 40, 50, history.Answered, history.Output{Status: 200, Views: 2, Waters: 1})
	require.True(t, Check(b.h, opts).OK())

	// An increment counted twice.
	b.add(history.NoteStats, note, 60, 70, history.Answered, history.Output{Status: 200, Views: 3, Waters: 1})
	r := Check(b.h, opts)
	require.Equal(t, porcupine.Illegal, r.Notes.Result, "%s", r)
}

func TestFailingCheckWritesHistoryAndVisualization(t *testing.T) {
	b := created(&builder{}, 1, false)
	b.add(history.Signup, signup(0), 10, 30, history.Answered, admitted("r0"))
	b.add(history.Signup, signup(1), 15, 35, history.Answered, admitted("r1"))
	r := Check(b.h, opts)
	dir := t.TempDir()
	paths, err := r.WriteArtifacts(dir, "oversell", b.h)
	require.NoError(t, err)
	require.Len(t, paths, 2)
	require.Equal(t, filepath.Join(dir, "oversell-history.json"), paths[0])
	h, err := history.ReadFile(paths[0])
	require.NoError(t, err)
	require.Len(t, h.Ops, 3)
	html, err := os.ReadFile(paths[1])
	require.NoError(t, err)
	require.True(t, strings.Contains(string(html), "signup(u1)"), "the visualization describes the operations")

	// A passing check writes nothing.
	paths, err = Check(history.History{}, opts).WriteArtifacts(dir, "ok", history.History{})
	require.NoError(t, err)
	require.Empty(t, paths)
}

func TestAnomalousAnswersFailTheCheck(t *testing.T) {
	b := created(&builder{}, 1, false)
	b.add(history.Signup, signup(0), 10, 30, history.Answered, history.Output{Status: 500, Code: "internal"})
	r := Check(b.h, opts)
	require.False(t, r.OK())
	require.Len(t, r.Anomalies, 1)
}
