package histcheck

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// The activity model: the sequential specification of one activity's
// seats. Its state is who holds seats or waits, for how many, in which
// order, and which registrations are closed; every client operation on
// the activity is a step. Display reads are steps only in the display model, where a
// cached seat count may exceed the authority's by the changes in flight.
// An activity in pools is checked on its own too, its pools' free seats
// unknown to it: the model's state is then every state the activity may be
// in (see pooled.go).

// Registration statuses the model tracks.
const (
	pending         = "pending"
	awaitingPayment = "awaiting_payment"
	approved        = "approved"
	waitlisted      = "waitlisted"
	cancelled       = "cancelled"
)

// unknownID stands for the id of a registration created by a signup whose
// answer never came: learned later from an already_registered refusal.
const unknownID = "?"

func occupying(status string) bool {
	return status == pending || status == awaitingPayment || status == approved
}

// holder is a user's active registration: none (status ""), occupying or
// waitlisted, for seats seats; block is the serial of the block it took
// its seats from (0: public seats).
type holder struct {
	reg, status string
	seats       int
	block       int
}

// activityState is the model's state. It is never changed in place.
type activityState struct {
	created  bool
	capacity int
	waitlist bool
	// fill: the waiting list serves every party that fits, oldest first;
	// else (strict) the head only, while it fits.
	fill     bool
	maxSeats int
	// pooled: the activity belongs to pools, whose free seats the model
	// does not know (see pooled.go); poolSeats is the least capacity of
	// its pools the history knows (0: none), which its taken never
	// exceeds.
	pooled    bool
	poolSeats int
	// series: the activity belongs to a series, whose other activities
	// the model does not see: any signup may find its user at the limit
	// (series.go checks the limit across them).
	series bool
	// window: the activity has an opening time or a queue, which refuse
	// signups the model cannot judge (the queue check does); queued: it has
	// an admission queue.
	window, queued bool
	// blocks are the live blocks, oldest first; made counts the blocks
	// created, to give each its serial.
	blocks []block
	made   int
	users  []holder
	queue  []int    // waitlisted users, first in line first
	closed []string // cancelled registrations, sorted
}

// taken is the seats of the occupying registrations.
func (s activityState) taken() int {
	n := 0
	for _, u := range s.users {
		if occupying(u.status) {
			n += u.seats
		}
	}
	return n
}

// free is the seats neither taken nor reserved; negative after a
// capacity cut. In pools, no more than its least pool could still give
// it.
func (s activityState) free() int {
	c := s.capacity
	if s.poolSeats > 0 {
		c = min(c, s.poolSeats)
	}
	return c - s.taken() - s.reserved()
}

func (s activityState) clone() activityState {
	c := s
	c.users = slices.Clone(s.users)
	c.queue = slices.Clone(s.queue)
	c.blocks = slices.Clone(s.blocks)
	return c
}

func (s activityState) isClosed(id string) bool {
	_, ok := slices.BinarySearch(s.closed, id)
	return ok
}

// close closes user u's registration (the caller cloned s).
func (s *activityState) close(u int) {
	id := s.users[u].reg
	if s.users[u].status == waitlisted {
		s.queue = slices.DeleteFunc(s.queue, func(q int) bool { return q == u })
	}
	if occupying(s.users[u].status) {
		s.giveBack(u, s.users[u].seats)
	}
	s.users[u] = holder{}
	if id != unknownID {
		i, _ := slices.BinarySearch(s.closed, id)
		s.closed = slices.Insert(slices.Clone(s.closed), i, id)
	}
	s.promote()
}

// activityInput is a step's input.
type activityInput struct {
	op history.Op
	// allowance is how far a display read may exceed the authority's
	// taken: signups and cancellations in flight, and what faults may have
	// left behind.
	allowance int
	// poolSeats is, for an activity's creation in pools, the least
	// capacity of its pools (0: unknown).
	poolSeats int
}

// activityOutput is a step's output; unknown: no answer came.
type activityOutput struct {
	out     history.Output
	unknown bool
}

func ok(o history.Output, status int) bool { return o.Status == status }

func refused(o history.Output, code string) bool {
	return o.Status == http.StatusConflict && o.Code == code
}

// stepActivity is the model's step. display: seat reads are steps too.
func stepActivity(display bool) func(st, in, out any) (bool, any) {
	return func(st, in, out any) (bool, any) {
		s := st.(activityState)
		op := in.(activityInput).op
		o := out.(activityOutput)
		if op.Kind == history.CreateActivity {
			if s.created {
				return false, s
			}
			return true, activityState{created: true, capacity: op.Input.Capacity, waitlist: op.Input.Waitlist,
				fill: op.Input.Policy == policyFill, maxSeats: max(op.Input.MaxSeats, 1), pooled: len(op.Input.Pools) > 0,
				poolSeats: in.(activityInput).poolSeats, series: op.Input.Series != "", window: op.Input.OpensAt != nil || op.Input.Queue != nil,
				queued: op.Input.Queue != nil, users: make([]holder, op.Input.Users)}
		}
		if !s.created || op.Input.User >= len(s.users) {
			return false, s
		}
		u := op.Input.User
		switch op.Kind {
		case history.CreateBlock:
			return createBlockAs(s, op.Input, s.free() >= max(op.Input.Seats, 1), o)
		case history.DeleteBlock:
			return stepDeleteBlock(s, op.Input.Block, o)
		case history.Signup:
			return stepSignup(s, u, max(op.Input.Seats, 1), op.Input.Code, op.Input.Roles, o)
		case history.Cancel:
			return stepCancel(s, u, op.Input.Registration, o)
		case history.SetStatus:
			return stepStatus(s, u, op.Input.Registration, op.Input.To, o)
		case history.ReduceSeats:
			return stepReduce(s, u, op.Input.Registration, op.Input.Seats, o)
		case history.SetCapacity:
			n := s.clone()
			n.capacity = op.Input.Capacity
			n.promote()
			if o.unknown {
				return true, n
			}
			return ok(o.out, http.StatusOK) && sameCounts(n, o.out) && remainingFits(n, o.out), n
		case history.ReadActivity:
			return ok(o.out, http.StatusOK) && sameCounts(s, o.out) && o.out.Waitlist == s.waitlist && remainingFits(s, o.out), s
		case history.ReadSeats:
			if !display {
				return true, s
			}
			return ok(o.out, http.StatusOK) && o.out.Taken <= s.taken()+in.(activityInput).allowance, s
		}
		return false, s
	}
}

func sameCounts(s activityState, o history.Output) bool {
	return o.Capacity == s.capacity && o.Taken == s.taken() && o.Waiting == len(s.queue) && o.Reserved == s.reserved()
}

// remainingFits reports whether the remaining an authoritative answer
// carries (if it carries one) fits state s: what a new signup could get,
// the activity's own free seats, or fewer when one of its pools has fewer
// left; and the line is quiet for it (strict: the head asks for more;
// fill: every waiting party asks for more), as every commit leaves it.
func remainingFits(s activityState, o history.Output) bool {
	if o.Remaining == nil {
		return true
	}
	r, free := *o.Remaining, max(0, s.free())
	if r < 0 || r > free || (!s.pooled && r != free) {
		return false
	}
	return s.quietAt(r)
}

// stepSignup is user u's signup for seats seats, with code ("": none)
// and the roles of its token.
func stepSignup(s activityState, u, seats int, code string, roles []string, o activityOutput) (bool, any) {
	return signupAs(s, u, seats, code, roles, s.decide(u, seats, code, roles), o)
}

// signupAs is user u's signup for seats seats with code and roles,
// decided d. In a
// series, any signup the activity would not refuse first (already
// registered, too many seats) may be refused at the user's limit.
func signupAs(s activityState, u, seats int, code string, roles []string, d decision, o activityOutput) (bool, activityState) {
	n := s
	if !o.unknown && s.series && d != already && d != tooMany && refused(o.out, "limit_reached") {
		return true, s
	}
	// The window and the admission token are decided before anything
	// else, and a refusal for them changes nothing.
	if !o.unknown && ((s.window && refused(o.out, "registration_closed")) ||
		(s.queued && o.out.Status == http.StatusForbidden && o.out.Code == "admission_required")) {
		return true, s
	}
	switch d {
	case fromBlock:
		k, _ := s.blockFor(code, roles, seats)
		n = s.clone()
		n.blocks[k].used += seats
		n.users[u] = holder{reg: unknownID, status: pending, seats: seats, block: n.blocks[k].serial}
	case admit:
		n = s.clone()
		n.users[u] = holder{reg: unknownID, status: pending, seats: seats}
	case waitlist:
		n = s.clone()
		n.users[u] = holder{reg: unknownID, status: waitlisted, seats: seats}
		n.queue = append(n.queue, u)
	}
	if o.unknown {
		return true, n
	}
	r := o.out
	switch {
	case (d == admit || d == fromBlock) && ok(r, http.StatusCreated) && r.RegStatus == pending && r.Registration != "" && r.Seats == seats:
		n.users[u].reg = r.Registration
		return n.seatedFrom(u, r.Block), n
	case d == waitlist && ok(r, http.StatusAccepted) && r.RegStatus == waitlisted && r.Position == len(s.queue)+1 && r.Seats == seats:
		n.users[u].reg = r.Registration
		return true, n
	case d == full && refused(r, "activity_full") && r.Remaining != nil && s.refusedWith(*r.Remaining, seats):
		return true, s
	case (d == tooMany || d == badCode) && r.Status == http.StatusBadRequest && r.Code == "invalid_request":
		return true, s
	case d == already && refused(r, "already_registered"):
		switch s.users[u].reg {
		case r.Registration:
			return true, s
		case unknownID:
			if s.isClosed(r.Registration) {
				return false, s
			}
			n = s.clone()
			n.users[u].reg = r.Registration
			return true, n
		}
	}
	return false, s
}

func stepCancel(s activityState, u int, id string, o activityOutput) (bool, any) {
	r := o.out
	switch {
	case s.users[u].reg == id:
		n := s.clone()
		n.close(u)
		return o.unknown || (ok(r, http.StatusOK) && r.RegStatus == cancelled && r.Seats == s.users[u].seats), n
	case s.isClosed(id):
		return o.unknown || (ok(r, http.StatusOK) && r.RegStatus == cancelled), s
	}
	return o.unknown || (r.Status == http.StatusNotFound && r.Code == "not_found"), s
}

func stepStatus(s activityState, u int, id, to string, o activityOutput) (bool, any) {
	r := o.out
	switch {
	case s.users[u].reg == id:
		from := s.users[u].status
		if (to == awaitingPayment && from == pending) || (to == approved && (from == pending || from == awaitingPayment)) {
			n := s.clone()
			n.users[u].status = to
			return o.unknown || (ok(r, http.StatusOK) && r.RegStatus == to && r.Seats == s.users[u].seats), n
		}
		return o.unknown || refused(r, "invalid_transition"), s
	case s.isClosed(id):
		return o.unknown || refused(r, "invalid_transition"), s
	}
	return o.unknown || (r.Status == http.StatusNotFound && r.Code == "not_found"), s
}

func equalActivity(a, b any) bool {
	x, y := a.(activityState), b.(activityState)
	return x.created == y.created && x.capacity == y.capacity && x.waitlist == y.waitlist && x.fill == y.fill &&
		x.maxSeats == y.maxSeats && x.pooled == y.pooled && x.poolSeats == y.poolSeats && x.series == y.series &&
		x.window == y.window && x.queued == y.queued &&
		x.made == y.made && slices.Equal(x.blocks, y.blocks) &&
		slices.Equal(x.users, y.users) && slices.Equal(x.queue, y.queue) && slices.Equal(x.closed, y.closed)
}

func hashActivity(a any) uint64 {
	s := a.(activityState)
	h := fnv.New64a()
	fmt.Fprint(h, s.created, s.capacity, s.waitlist, s.fill, s.maxSeats, s.pooled, s.poolSeats, s.series, s.window, s.queued, s.made, s.blocks,
		s.users, s.queue, len(s.closed))
	return h.Sum64()
}

func describeActivity(a any) string {
	s := a.(activityState)
	if !s.created {
		return "not created"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "capacity %d, taken %d, waitlist %v", s.capacity, s.taken(), s.waitlist)
	if s.maxSeats > 1 || s.fill {
		fmt.Fprintf(&b, " (%s, up to %d seats each)", policyName(s.fill), s.maxSeats)
	}
	if s.pooled {
		b.WriteString(", in pools")
		if s.poolSeats > 0 {
			fmt.Fprintf(&b, " (the least of %d seats)", s.poolSeats)
		}
	}
	if s.series {
		b.WriteString(", in a series")
	}
	if s.queued {
		b.WriteString(", behind a queue")
	}
	for _, k := range s.blocks {
		fmt.Fprintf(&b, "; block #%d %s (%s) %d of %d used", k.serial, k.id, k.audience(), k.used, k.seats)
	}
	for i, u := range s.users {
		if u.status != "" {
			fmt.Fprintf(&b, "; u%d %s %s%s", i, u.status, u.reg, seatsNote(u.seats))
			if u.block > 0 {
				fmt.Fprintf(&b, " from block #%d", u.block)
			}
		}
	}
	if len(s.queue) > 0 {
		fmt.Fprintf(&b, "; line %v", s.queue)
	}
	fmt.Fprintf(&b, "; %d cancelled", len(s.closed))
	return b.String()
}

func describeActivityOp(in, out any) string {
	op := in.(activityInput).op
	o := out.(activityOutput)
	var call string
	switch op.Kind {
	case history.CreateActivity:
		call = fmt.Sprintf("create(capacity %d, waitlist %v, %s, up to %d seats each%s)", op.Input.Capacity, op.Input.Waitlist,
			policyName(op.Input.Policy == policyFill), max(op.Input.MaxSeats, 1), poolsNote(op.Input.Pools))
	case history.Signup:
		call = fmt.Sprintf("signup(u%d%s%s%s)", op.Input.User, seatsNote(op.Input.Seats), codeNote(op.Input.Code, op.Input.Roles), keyNote(op.Input.IdempotencyKey))
	case history.CreateBlock:
		call = fmt.Sprintf("block(%d seats, %s)", max(op.Input.Seats, 1), blockNote(op.Input))
	case history.DeleteBlock:
		call = fmt.Sprintf("delete block(%s)", op.Input.Block)
	case history.Cancel:
		call = fmt.Sprintf("cancel(u%d %s)", op.Input.User, op.Input.Registration)
	case history.SetStatus:
		call = fmt.Sprintf("status(u%d %s → %s)", op.Input.User, op.Input.Registration, op.Input.To)
	case history.ReduceSeats:
		call = fmt.Sprintf("reduce(u%d %s to %d)", op.Input.User, op.Input.Registration, op.Input.Seats)
	case history.SetCapacity:
		call = fmt.Sprintf("capacity(%d)", op.Input.Capacity)
	case history.ReadActivity:
		call = "read"
	case history.ReadPool:
		call = "read pool"
	case history.ReadSeats:
		call = fmt.Sprintf("seats(allow +%d)", in.(activityInput).allowance)
	}
	return call + " → " + describeOutput(op.Kind, o.out, o.unknown)
}

// seatsNote notes a party of more than one seat.
func seatsNote(seats int) string {
	if seats > 1 {
		return fmt.Sprintf(" ×%d", seats)
	}
	return ""
}

func keyNote(k string) string {
	if k == "" {
		return ", no key"
	}
	return ""
}

func describeOutput(k history.Kind, o history.Output, unknown bool) string {
	if unknown {
		return "unknown"
	}
	if o.Code != "" {
		switch {
		case o.Registration != "":
			return fmt.Sprintf("%d %s %s", o.Status, o.Code, o.Registration)
		case o.Remaining != nil:
			return fmt.Sprintf("%d %s (%d remaining)", o.Status, o.Code, *o.Remaining)
		}
		return fmt.Sprintf("%d %s", o.Status, o.Code)
	}
	switch k {
	case history.CreateBlock:
		return fmt.Sprintf("%d %s", o.Status, o.ID)
	case history.DeleteBlock:
		return fmt.Sprintf("%d", o.Status)
	case history.Signup, history.Cancel, history.SetStatus, history.ReduceSeats:
		if o.Position > 0 {
			return fmt.Sprintf("%d %s %s%s #%d", o.Status, o.Registration, o.RegStatus, seatsNote(o.Seats), o.Position)
		}
		if o.Block != "" {
			return fmt.Sprintf("%d %s %s%s from block %s", o.Status, o.Registration, o.RegStatus, seatsNote(o.Seats), o.Block)
		}
		return fmt.Sprintf("%d %s %s%s", o.Status, o.Registration, o.RegStatus, seatsNote(o.Seats))
	case history.ReadSeats:
		return fmt.Sprintf("taken %d waiting %d (%s)", o.Taken, o.Waiting, o.Source)
	case history.NoteView, history.NoteWater, history.NoteStats:
		return fmt.Sprintf("views %d waters %d", o.Views, o.Waters)
	}
	if o.Reserved > 0 && o.Remaining != nil {
		return fmt.Sprintf("capacity %d taken %d reserved %d waiting %d remaining %d", o.Capacity, o.Taken, o.Reserved, o.Waiting, *o.Remaining)
	}
	if o.Remaining != nil {
		return fmt.Sprintf("capacity %d taken %d waiting %d remaining %d", o.Capacity, o.Taken, o.Waiting, *o.Remaining)
	}
	return fmt.Sprintf("capacity %d taken %d waiting %d", o.Capacity, o.Taken, o.Waiting)
}

// activityModel is the porcupine model of activities, partitioned by
// activity; its state is an activityStates. display adds the seat reads.
func activityModel(display bool) porcupine.Model {
	return porcupine.Model{
		Partition:         partitionByKey,
		Init:              func() any { return activityStates{{}} },
		Step:              stepStates(display),
		Equal:             equalStates,
		Hash:              hashStates,
		DescribeOperation: describeActivityOp,
		DescribeState:     describeStates,
		DescribeOperationMetadata: func(m any) string {
			if m == nil {
				return ""
			}
			return fmt.Sprint(m)
		},
	}
}

// partitionByKey splits a history by the object its operations are about.
func partitionByKey(ops []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var out [][]porcupine.Operation
	for _, op := range ops {
		k := keyOf(op.Input)
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], op)
	}
	return out
}

func keyOf(in any) string {
	switch in := in.(type) {
	case activityInput:
		return in.op.Input.Key
	case noteInput:
		return in.op.Input.Key
	}
	return ""
}
