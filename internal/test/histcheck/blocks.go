package histcheck

import (
	"net/http"
	"slices"
	"strings"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// Reserved seats. A block holds seats of an activity for its audience:
// the signups with its code, or those whose token's roles hold its role.
// Its unused seats are the activity's reserved, taken for everyone else
// (free counts them). A signup takes its seats from the oldest live block
// it is the audience of (by its code or by one of its roles) with room
// for all of them (nothing besides it overdrawn), whoever waits; else it
// is public. A code that names no live block is refused (400), whatever
// the signup's roles; roles that no block has are no refusal. What a
// block registration gives back (a cancellation, fewer seats) returns to
// its block while the block lives: nobody is promoted. Creating a block
// needs its seats free, else activity_full; deleting one returns its
// unused seats to the public and promotes the line.
//
// The model knows blocks by their codes and roles (signups) and by the
// ids their creation answered (deletions): one whose creation got no
// answer cannot be named by a deletion. Block expiry is not modelled.

// block is a live block of the activity.
type block struct {
	// serial is its place among the blocks the state created (from 1):
	// the registrations made from it name it so.
	serial int
	// id is the id its creation answered; unknownID when none came.
	id string
	// code or role is its audience: exactly one is set.
	code, role  string
	seats, used int
}

// serves reports whether a signup with code and roles is the block's
// audience.
func (b block) serves(code string, roles []string) bool {
	if b.code != "" {
		return code == b.code
	}
	return b.role != "" && slices.Contains(roles, b.role)
}

// audience describes the block's audience.
func (b block) audience() string {
	if b.code != "" {
		return "code " + b.code
	}
	return "role " + b.role
}

func (b block) unused() int { return max(0, b.seats-b.used) }

// reserved is the unused seats of the live blocks.
func (s activityState) reserved() int {
	n := 0
	for _, b := range s.blocks {
		n += b.unused()
	}
	return n
}

// blockFor returns the index of the block a signup with code and roles
// for seats seats takes them from (-1: none, a public signup), and
// whether code names a live block ("" always does): the oldest block the
// signup is the audience of with room for all the seats.
func (s activityState) blockFor(code string, roles []string, seats int) (int, bool) {
	if code != "" && !slices.ContainsFunc(s.blocks, func(b block) bool { return b.code == code }) {
		return -1, false
	}
	for k, b := range s.blocks {
		if b.serves(code, roles) && b.unused() >= seats && s.free()+b.unused() >= seats {
			return k, true
		}
	}
	return -1, true
}

// seatedFrom reports whether a signup's answer, that user u was seated
// from the block id ("": not said), fits the block the model seated u
// from: none for public seats; the same one when its id is known.
func (s activityState) seatedFrom(u int, id string) bool {
	if id == "" {
		return true
	}
	serial := s.users[u].block
	k := slices.IndexFunc(s.blocks, func(b block) bool { return b.serial == serial })
	return serial > 0 && k >= 0 && (s.blocks[k].id == unknownID || s.blocks[k].id == id)
}

// giveBack returns seats of user u's registration to its block, if it
// was made from one that still lives (the caller cloned s).
func (s *activityState) giveBack(u, seats int) {
	serial := s.users[u].block
	if serial == 0 {
		return
	}
	for k := range s.blocks {
		if s.blocks[k].serial == serial {
			s.blocks[k].used -= min(seats, s.blocks[k].used)
			return
		}
	}
}

// createBlockAs is the creation of a block of in.Seats seats for in.Code
// or in.Role: made, or refused as full.
func createBlockAs(s activityState, in history.Input, made bool, o activityOutput) (bool, activityState) {
	seats := max(in.Seats, 1)
	r := o.out
	if !made {
		return o.unknown || (refused(r, "activity_full") && r.Remaining != nil && s.refusedWith(*r.Remaining, seats)), s
	}
	n := s.clone()
	n.made++
	b := block{serial: n.made, id: unknownID, code: in.Code, role: in.Role, seats: seats}
	if !o.unknown {
		b.id = r.ID
	}
	n.blocks = append(n.blocks, b)
	return o.unknown || (ok(r, http.StatusCreated) && r.ID != "" && r.Seats == seats), n
}

// stepDeleteBlock is the deletion of the block id: its unused seats
// return to the public and the line is promoted; a block not live is
// not found.
func stepDeleteBlock(s activityState, id string, o activityOutput) (bool, any) {
	r := o.out
	k := slices.IndexFunc(s.blocks, func(b block) bool { return b.id == id && id != unknownID })
	if k < 0 {
		return o.unknown || (r.Status == http.StatusNotFound && r.Code == "not_found"), s
	}
	n := s.clone()
	n.blocks = slices.Delete(n.blocks, k, k+1)
	n.promote()
	return o.unknown || ok(r, http.StatusNoContent), n
}

// codeNote notes a signup's code and roles.
func codeNote(code string, roles []string) string {
	var note string
	if code != "" {
		note = ", code " + code
	}
	if len(roles) > 0 {
		note += ", roles " + strings.Join(roles, " ")
	}
	return note
}

// blockNote describes a block's creation.
func blockNote(in history.Input) string {
	if in.Role != "" {
		return "role " + in.Role
	}
	return "code " + in.Code
}
