package histcheck

import (
	"fmt"
	"slices"
)

// The door check: one check-in list's promises, over its recorded history
// (its check-ins in commit order), the event logs of its activities (in
// seq order, check-in events among the seat changes) and the scans the
// clients got a 200 for.
//
//   - The history has no gap: seqs 1, 2, 3, …
//   - Every answered check-in is in the history as answered (registration,
//     type, forced), and every check-in of the history was answered to
//     someone, unless its scan got no answer (AnswersComplete false).
//   - Entry "once": at most one accepted (not forced) entry per
//     registration.
//   - Entries only while valid: when an accepted entry committed, its
//     registration held a seat, by its activity's event log.
//   - The room: replaying the history, an accepted entry never takes the
//     seats inside above max_inside (forced ones may).
//   - Forced check-ins are flagged: a forced one that broke a rule names
//     it, and the list's conflicts count them.
//   - The list's counts equal the replay: checked_in (registrations with
//     an entry), inside (seats in, less those gone out), conflicts.

// DoorCheckIn is one check-in of a list's history, or of an answer.
type DoorCheckIn struct {
	Seq            int64
	RegistrationID string
	Type           string // "entry" or "exit"
	Seats          int
	Forced         bool
	Conflict       string
}

// DoorEvent is one event of an activity's log, in seq order: the
// registration's status after it, and for a check-in event its list and
// whether it was forced.
type DoorEvent struct {
	Seq            int64
	RegistrationID string
	Type           string
	To             string
	ListID         string
	Forced         bool
}

// DoorList is a list's settings and final counts.
type DoorList struct {
	ID                           string
	Entry                        string
	MaxInside                    *int
	CheckedIn, Inside, Conflicts int
	AnswersComplete              bool
	History                      []DoorCheckIn
	Answers                      []DoorCheckIn
	Events                       [][]DoorEvent // one log per activity
}

// doorReplay is the list's state replayed from its history.
type doorReplay struct {
	DoorList
	entries, inside, seatsInside    map[string]int
	checkedIn, insideSum, conflicts int
}

// DoorVerdict is the outcome of the door check.
type DoorVerdict struct {
	CheckIns, Answers int
	Violations        []string
}

// OK reports whether the list kept every promise.
func (v DoorVerdict) OK() bool { return len(v.Violations) == 0 }

// CheckDoor checks one list.
func CheckDoor(l DoorList) DoorVerdict {
	v := DoorVerdict{CheckIns: len(l.History), Answers: len(l.Answers)}
	bad := func(format string, args ...any) { v.Violations = append(v.Violations, fmt.Sprintf(format, args...)) }
	bySeq := map[int64]DoorCheckIn{}
	for i, c := range l.History {
		if c.Seq != int64(i+1) {
			bad("the history's check-in %d has seq %d: a gap or a reorder", i+1, c.Seq)
		}
		bySeq[c.Seq] = c
	}
	answered := map[int64]bool{}
	for _, a := range l.Answers {
		answered[a.Seq] = true
		h, ok := bySeq[a.Seq]
		if !ok || h.RegistrationID != a.RegistrationID || h.Type != a.Type || h.Forced != a.Forced {
			bad("answered check-in %d (%s %s) is not in the history as answered", a.Seq, a.RegistrationID, a.Type)
		}
	}
	if l.AnswersComplete {
		for _, h := range l.History {
			if !answered[h.Seq] {
				bad("check-in %d of %s was recorded but never answered", h.Seq, h.RegistrationID)
			}
		}
	}
	valid := validAtCheckIns(l)
	r := &doorReplay{DoorList: l, entries: map[string]int{}, inside: map[string]int{}, seatsInside: map[string]int{}}
	for _, c := range l.History {
		r.replay(c, valid, bad)
	}
	if l.CheckedIn != r.checkedIn || l.Inside != r.insideSum || l.Conflicts != r.conflicts {
		bad("the list counts checked_in %d, inside %d, conflicts %d; its history %d, %d, %d",
			l.CheckedIn, l.Inside, l.Conflicts, r.checkedIn, r.insideSum, r.conflicts)
	}
	return v
}

// replay applies one check-in of the history to the list's state.
func (l *doorReplay) replay(c DoorCheckIn, valid map[string][]bool, bad func(string, ...any)) {
	if c.Forced {
		if c.Conflict != "" {
			l.conflicts++
		}
	} else if c.Conflict != "" {
		bad("check-in %d is not forced but has the conflict %s", c.Seq, c.Conflict)
	}
	switch c.Type {
	case "entry":
		if !c.Forced {
			if l.Entry == "once" && l.entries[c.RegistrationID] > 0 {
				bad("check-in %d: %s entered again on a once list", c.Seq, c.RegistrationID)
			}
			if l.MaxInside != nil && l.inside[c.RegistrationID] == 0 && l.insideSum+c.Seats > *l.MaxInside {
				bad("check-in %d: %d seats inside, %d more pass max_inside %d", c.Seq, l.insideSum, c.Seats, *l.MaxInside)
			}
			if ok := valid[c.RegistrationID]; len(ok) == 0 || !ok[0] {
				bad("check-in %d: %s entered while it held no seat", c.Seq, c.RegistrationID)
			}
		}
		if l.entries[c.RegistrationID] == 0 {
			l.checkedIn++
		}
		l.entries[c.RegistrationID]++
		if l.inside[c.RegistrationID] == 0 {
			l.inside[c.RegistrationID], l.seatsInside[c.RegistrationID] = 1, c.Seats
			l.insideSum += c.Seats
		}
	case "exit":
		if l.inside[c.RegistrationID] > 0 {
			l.insideSum -= l.seatsInside[c.RegistrationID]
			l.inside[c.RegistrationID], l.seatsInside[c.RegistrationID] = 0, 0
		}
	}
	if c.Type == "entry" && !c.Forced {
		if ok := valid[c.RegistrationID]; len(ok) > 0 {
			valid[c.RegistrationID] = ok[1:]
		}
	}
}

// validAtCheckIns returns, per registration, whether it held a seat at
// each of its accepted entries on the list, in order, by the event logs.
func validAtCheckIns(l DoorList) map[string][]bool {
	out := map[string][]bool{}
	occupying := []string{"pending", "awaiting_payment", "approved"}
	for _, log := range l.Events {
		status := map[string]string{}
		for _, e := range log {
			if e.Type == "registration.checked_in" && e.ListID == l.ID && !e.Forced {
				out[e.RegistrationID] = append(out[e.RegistrationID], slices.Contains(occupying, status[e.RegistrationID]))
			}
			status[e.RegistrationID] = e.To
		}
	}
	return out
}
