package histcheck

import (
	"net/http"
	"slices"
	"strings"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// Confirmations and releases in the activity model. Two kinds of
// operation join the history's own:
//
//   - Confirm: a user confirms their registration (POST
//     /v1/registrations/{id}/confirm; Input Key, User, Registration; the
//     answer as a status change's). A seated registration is confirmed
//     (200) and stays so; one waiting has nothing to confirm
//     (invalid_transition). Once the activity's confirm_by has passed an
//     unconfirmed one is refused as confirmation_closed. The model does
//     not know the moment (a change decides by its transaction's start,
//     which may precede a change ordered before it), so it allows the
//     refusal of any unconfirmed one; the release check (release.go)
//     judges what the moment decides from the event log's own times.
//   - Release: the service released seated registrations by a rule
//     ("unconfirmed" at confirm_by, "no_show" after the activity's start),
//     and promoted the line in the same transaction. Nobody asked for it:
//     the operation is read from the activity's event log afterwards
//     (AddReleases), from the transaction's start to a bound on its
//     commit. Its step releases exactly the registrations the log names —
//     each holding a seat, and for "unconfirmed" not confirmed by an
//     answered confirmation — then promotes by the policy: outside pools
//     the promotions must be those the log recorded right after the
//     releases, in order; in pools, where the pools' free seats are not
//     known, any the policy allows, as the recorded ones.
const (
	Confirm history.Kind = "confirm"
	Release history.Kind = "release"
)

// Release rules, as a release's Input.To and the events' reason.
const (
	ReasonUnconfirmed = "unconfirmed"
	ReasonNoShow      = "no_show"
)

// promotedMark marks, in a release's Output.Registrations, the
// registrations it promoted; the others are those it released.
const promotedMark = "+"

// releaseOp is the operation of one release transaction on activity key:
// the registrations released by reason (freeing seats seats), then those
// promoted, from call to ret.
func releaseOp(key, reason string, seats int, released, promoted []string, call, ret int64) history.Op {
	regs := slices.Clone(released)
	for _, id := range promoted {
		regs = append(regs, promotedMark+id)
	}
	return history.Op{Kind: Release, Instance: "service", Call: call, Return: ret, Result: history.Answered,
		Input:  history.Input{Key: key, To: reason, Held: seats},
		Output: history.Output{Status: http.StatusOK, Registrations: regs}}
}

// ReleaseOf returns the registrations a release (a Release operation's
// output) released, and those it promoted.
func ReleaseOf(o history.Output) (released, promoted []string) {
	for _, id := range o.Registrations {
		if p, ok := strings.CutPrefix(id, promotedMark); ok {
			promoted = append(promoted, p)
		} else {
			released = append(released, id)
		}
	}
	return released, promoted
}

// stepLifecycle is a confirmation's or a release's step from s: every
// state it may leave (none: it is not explained).
func stepLifecycle(s activityState, op history.Op, o activityOutput) []activityState {
	if op.Kind == Release {
		return stepRelease(s, op.Input.To, o.out)
	}
	return stepConfirm(s, op.Input.User, op.Input.Registration, o)
}

// stepConfirm is user u's confirmation of registration id.
func stepConfirm(s activityState, u int, id string, o activityOutput) []activityState {
	r := o.out
	h := s.users[u]
	switch {
	case h.reg == id && h.status == waitlisted:
		return onlyIf(o.unknown || refused(r, "invalid_transition"), s)
	case h.reg == id && occupying(h.status):
		n := s.clone()
		n.users[u].confirmed = true
		switch {
		case o.unknown:
			return activityStates{s}.with(n)
		case ok(r, http.StatusOK) && r.RegStatus == h.status && r.Seats == h.seats:
			return []activityState{n}
		}
		return onlyIf(!h.confirmed && refused(r, "confirmation_closed"), s)
	case s.isClosed(id):
		return onlyIf(o.unknown || refused(r, "invalid_transition") || refused(r, "confirmation_closed"), s)
	}
	return onlyIf(o.unknown || (r.Status == http.StatusNotFound && r.Code == "not_found"), s)
}

func onlyIf(good bool, s activityState) []activityState {
	if good {
		return []activityState{s}
	}
	return nil
}

// stepRelease is the step from s of a release transaction by reason
// whose output is o.
func stepRelease(s activityState, reason string, o history.Output) []activityState {
	released, promoted := ReleaseOf(o)
	var out []activityState
	for _, n := range releaseEach(s, released, reason) {
		line := slices.Clone(n.queue)
		if !n.pooled {
			n = n.clone()
			n.promote()
			out = append(out, promotedAs(n, line, promoted, true)...)
			continue
		}
		for _, m := range n.promotions() {
			out = append(out, promotedAs(m, line, promoted, false)...)
		}
	}
	return out
}

// releaseEach releases registrations ids by reason, one after the other,
// without promoting: each must hold a seat (and, for "unconfirmed", not
// be confirmed). A registration the model knows by no id (its signup's
// answer never came) may be any seated one of unknown id: each is a
// state of its own.
func releaseEach(s activityState, ids []string, reason string) []activityState {
	if len(ids) == 0 {
		return []activityState{s}
	}
	id := ids[0]
	var cands []int
	if u := slices.IndexFunc(s.users, func(h holder) bool { return h.reg == id }); u >= 0 {
		cands = []int{u}
	} else if !s.isClosed(id) {
		for u, h := range s.users {
			if h.reg == unknownID && occupying(h.status) {
				cands = append(cands, u)
			}
		}
	}
	var out []activityState
	for _, u := range cands {
		h := s.users[u]
		if !occupying(h.status) || (reason == ReasonUnconfirmed && h.confirmed) || (reason != ReasonUnconfirmed && reason != ReasonNoShow) {
			continue
		}
		n := s.clone()
		n.users[u].reg = id
		n.closeOnly(u)
		out = append(out, releaseEach(n, ids[1:], reason)...)
	}
	return out
}

// promotedAs returns s if the parties of line that s seated are the
// registrations ids (in line order when ordered, else in any), with the
// ids of those the model knew by no id learned: each way of learning them
// is a state of its own.
func promotedAs(s activityState, line []int, ids []string, ordered bool) []activityState {
	var seated []int
	for _, u := range line {
		if occupying(s.users[u].status) {
			seated = append(seated, u)
		}
	}
	if len(seated) != len(ids) {
		return nil
	}
	if ordered {
		n := s.clone()
		for k, u := range seated {
			if !n.learnID(u, ids[k]) {
				return nil
			}
		}
		return []activityState{n}
	}
	var out []activityState
	var assign func(n activityState, rest []int, left []string)
	assign = func(n activityState, rest []int, left []string) {
		if len(rest) == 0 {
			out = append(out, n)
			return
		}
		for k, id := range left {
			m := n.clone()
			if m.learnID(rest[0], id) {
				assign(m, rest[1:], slices.Delete(slices.Clone(left), k, k+1))
			}
		}
	}
	assign(s, seated, ids)
	return out
}

// learnID reports whether user u's registration may be id, and records
// it if the model knew it by no id (the caller cloned s).
func (s *activityState) learnID(u int, id string) bool {
	switch s.users[u].reg {
	case id:
		return true
	case unknownID:
		if s.isClosed(id) || slices.ContainsFunc(s.users, func(h holder) bool { return h.reg == id }) {
			return false
		}
		s.users[u].reg = id
		return true
	}
	return false
}
