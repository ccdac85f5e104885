package loadtest

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/physiciansnet/capacityd/client"
)

// doorRun is what one rush's answers said, per ticket; safe for
// concurrent use.
type doorRun struct {
	answers statusTally
	// entered, already and roomFull count the scans answered 200
	// ("entered"), 409 already_checked_in and 409 room_full; other counts
	// every other outcome (another refusal, a 5xx, an answer that is not
	// an entry, a replay, no answer).
	entered, already, roomFull, other atomic.Int64
	// seq is the seq of the check-in each ticket's scan answered 200
	// with (0: none); twice counts the tickets answered 200 again.
	seq   []atomic.Int64
	twice atomic.Int64
	// refusedAlready is set for a ticket refused as already checked in.
	refusedAlready []atomic.Bool
}

func newDoorRun(tickets int) *doorRun {
	return &doorRun{seq: make([]atomic.Int64, tickets), refusedAlready: make([]atomic.Bool, tickets)}
}

// record counts one scan of ticket t: an entry (200) or a refusal as
// already checked in or as room full (409) is a success, anything else
// fails.
func (r *doorRun) record(t int, res client.CheckinResult, err error) error {
	var ce *client.Error
	switch {
	case err == nil:
		r.answers.add(http.StatusOK)
		if res.Result != "entered" || res.Checkin == nil || res.Checkin.Seq <= 0 || res.Replayed {
			r.other.Add(1)
			return fmt.Errorf("scan answered 200 %q (replayed %v), want a new entry", res.Result, res.Replayed)
		}
		r.entered.Add(1)
		if !r.seq[t].CompareAndSwap(0, res.Checkin.Seq) {
			r.twice.Add(1)
		}
		return nil
	case errors.As(err, &ce):
		r.answers.add(ce.Status)
		switch {
		case ce.Status == http.StatusConflict && ce.Code == client.CodeAlreadyCheckedIn:
			r.already.Add(1)
			r.refusedAlready[t].Store(true)
			return nil
		case ce.Status == http.StatusConflict && ce.Code == client.CodeRoomFull:
			r.roomFull.Add(1)
			return nil
		}
	default:
		r.answers.add(0)
	}
	r.other.Add(1)
	return err
}

// doorVerdict is a rush's exactness, judged from its list's history and
// counts afterwards.
type doorVerdict struct {
	// entered is the scans answered 200, history the check-ins in the
	// list's history, inside and checkedIn the list's counts.
	entered, history, inside, checkedIn int64
	// enteredTwice counts the registrations with more than one entry in
	// the history (or answered 200 more than once).
	enteredTwice int64
	// overMax is how far inside is over the room's limit (0 when not).
	overMax int64
	// insideOff is |inside − entered| + |checked_in − entered|: with no
	// exits, every accepted entry is one seat inside.
	insideOff int64
	// mismatched counts the scans answered 200 whose check-in is not in
	// the history as answered, and the history's check-ins that no scan
	// was answered 200 with, not an entry of one seat at the seq that
	// follows the one before, or forced.
	mismatched int64
	// unjustified counts the refusals the history belies: as already
	// checked in with no entry of the ticket in the history, and as room
	// full while the room was never full (it only fills: no exits).
	unjustified int64
}

// add adds v2's violations to v's (the counts stay v's).
func (v *doorVerdict) add(v2 doorVerdict) {
	v.enteredTwice += v2.enteredTwice
	v.overMax += v2.overMax
	v.insideOff += v2.insideOff
	v.mismatched += v2.mismatched
	v.unjustified += v2.unjustified
}

// judge compares the list's history (every check-in, in seq order) and
// counts with the answers; regIDs[t] is ticket t's registration.
func (r *doorRun) judge(regIDs []string, history []client.CheckIn, list client.CheckinList, maxInside int) doorVerdict {
	v := doorVerdict{entered: r.entered.Load(), history: int64(len(history)), inside: int64(list.Inside),
		checkedIn: int64(list.CheckedIn), enteredTwice: r.twice.Load()}
	ticketOf := make(map[string]int, len(regIDs))
	for t, id := range regIDs {
		ticketOf[id] = t
	}
	entries := make([]int, len(regIDs))
	for i, ci := range history {
		t, ok := ticketOf[ci.RegistrationID]
		if !ok || ci.Seq != int64(i+1) || ci.Type != client.ScanEntry || ci.Seats != 1 || ci.Forced || ci.Conflict != nil ||
			r.seq[t].Load() != ci.Seq {
			v.mismatched++
		}
		if ok {
			entries[t]++
			if entries[t] == 2 {
				v.enteredTwice++
			}
		}
	}
	for t := range regIDs {
		if s := r.seq[t].Load(); s != 0 && (s > int64(len(history)) || history[s-1].RegistrationID != regIDs[t]) {
			v.mismatched++
		}
		if r.refusedAlready[t].Load() && entries[t] == 0 {
			v.unjustified++
		}
	}
	v.overMax = max(0, v.inside-int64(maxInside))
	v.insideOff = abs(v.inside-v.entered) + abs(v.checkedIn-v.entered)
	if v.inside < int64(maxInside) {
		v.unjustified += r.roomFull.Load()
	}
	return v
}

func abs(x int64) int64 { return max(x, -x) }

// doorSync is what a list's first ticket sync held.
type doorSync struct {
	// tickets is the distinct registrations of the crowd it named; extra
	// the items beyond them (another registration, or one named twice).
	tickets, extra int64
	// inexact counts the crowd's registrations the sync says are not
	// valid, or whose entries and inside disagree with the history.
	inexact int64
}

// judgeSync compares the sync's items with the crowd (regIDs) and the
// entries of each registration in the history (no exits: inside once
// entered).
func judgeSync(regIDs []string, history []client.CheckIn, items []client.TicketSyncItem) doorSync {
	entries := make(map[string]int, len(history))
	for _, ci := range history {
		entries[ci.RegistrationID]++
	}
	crowd := make(map[string]bool, len(regIDs))
	for _, id := range regIDs {
		crowd[id] = false
	}
	var s doorSync
	for _, it := range items {
		seen, ok := crowd[it.RegistrationID]
		if !ok || seen {
			s.extra++
			continue
		}
		crowd[it.RegistrationID] = true
		s.tickets++
		e := entries[it.RegistrationID]
		if !it.Valid || it.Entries != e || it.Inside != (e > 0) {
			s.inexact++
		}
	}
	return s
}
