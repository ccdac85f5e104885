package histcheck

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"

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
// in (see pooled.go). The steps are in activity_step.go, the descriptions
// of states and operations in activity_describe.go.

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
// its seats from (0: public seats); confirmed: a confirmation of it was
// answered 200 (it may be confirmed without one: see stepConfirm).
type holder struct {
	reg, status string
	seats       int
	block       int
	confirmed   bool
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

// close closes user u's registration and promotes the line (the caller
// cloned s).
func (s *activityState) close(u int) {
	s.closeOnly(u)
	s.promote()
}

// closeOnly closes user u's registration, its seats given back, without
// promoting (the caller cloned s).
func (s *activityState) closeOnly(u int) {
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
	var scratch [512]byte
	b := scratch[:0]
	for _, f := range []bool{s.created, s.waitlist, s.fill, s.pooled, s.series, s.window, s.queued} {
		b = strconv.AppendBool(b, f)
	}
	for _, n := range []int{s.capacity, s.maxSeats, s.poolSeats, s.made, len(s.closed)} {
		b = strconv.AppendInt(append(b, ' '), int64(n), 10)
	}
	for _, k := range s.blocks {
		b = append(append(append(append(b, '|'), k.id...), ' '), k.code...)
		b = append(append(b, ' '), k.role...)
		for _, n := range []int{k.serial, k.seats, k.used} {
			b = strconv.AppendInt(append(b, ' '), int64(n), 10)
		}
	}
	for _, u := range s.users {
		b = append(append(append(append(b, '|'), u.reg...), ' '), u.status...)
		b = strconv.AppendInt(append(b, ' '), int64(u.seats), 10)
		b = strconv.AppendInt(append(b, ' '), int64(u.block), 10)
		b = strconv.AppendBool(append(b, ' '), u.confirmed)
	}
	for _, q := range s.queue {
		b = strconv.AppendInt(append(b, ','), int64(q), 10)
	}
	return maphash.Bytes(hashSeed, b)
}

// hashSeed seeds hashActivity: the same for the whole check.
var hashSeed = maphash.MakeSeed()

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
