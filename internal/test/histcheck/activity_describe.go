package histcheck

import (
	"fmt"
	"strings"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

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
			if u.confirmed {
				b.WriteString(" confirmed")
			}
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
	case Confirm:
		call = fmt.Sprintf("confirm(u%d %s)", op.Input.User, op.Input.Registration)
	case Release:
		released, promoted := ReleaseOf(o.out)
		return fmt.Sprintf("release by the service (%s: %s; promoted: %s)", op.Input.To, strings.Join(released, " "), strings.Join(promoted, " "))
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
	case history.Signup, history.Cancel, history.SetStatus, history.ReduceSeats, Confirm:
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
