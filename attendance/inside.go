package attendance

import (
	"cmp"
	"slices"
	"time"
)

// Type is a check-in's direction, as the checkin table records it.
type Type string

// Check-in types.
const (
	Entry Type = "entry"
	Exit  Type = "exit"
)

// Check is one recorded check-in of a registration: accepted or forced,
// on any list that includes its activity.
type Check struct {
	// List is the check-in list's internal id, Seq its number on the list
	// (which orders check-ins of the same instant).
	List int64
	Seq  int64
	Type Type
	At   time.Time
}

// Interval is a stretch of time inside, [From, To).
type Interval struct {
	From, To time.Time
}

// Intervals returns the time inside that one registration's check-ins
// show, list by list: on each list an entry opens a stretch and the next
// exit on that list closes it; an entry while already inside does not
// restart it, an exit while outside is ignored, and a stretch still open
// after the last check-in lasts until openUntil (the activity's end; when
// openUntil is zero an open stretch is left out). The stretches of all
// lists are returned as they are, unmerged, ordered by list and time.
func Intervals(checks []Check, openUntil time.Time) []Interval {
	checks = slices.Clone(checks)
	slices.SortStableFunc(checks, func(a, b Check) int {
		return cmp.Or(cmp.Compare(a.List, b.List), a.At.Compare(b.At), cmp.Compare(a.Seq, b.Seq))
	})
	var out []Interval
	for i := 0; i < len(checks); {
		list := checks[i].List
		inside := false
		var from time.Time
		for ; i < len(checks) && checks[i].List == list; i++ {
			c := checks[i]
			switch {
			case c.Type == Entry && !inside:
				inside, from = true, c.At
			case c.Type == Exit && inside:
				inside = false
				out = append(out, Interval{From: from, To: c.At})
			}
		}
		if inside && !openUntil.IsZero() {
			out = append(out, Interval{From: from, To: openUntil})
		}
	}
	return out
}

// Merge returns the union of intervals as disjoint intervals in time
// order: two lists that saw someone inside at the same time count that
// time once. Empty or reversed intervals are dropped.
func Merge(intervals []Interval) []Interval {
	var in []Interval
	for _, iv := range intervals {
		if iv.To.After(iv.From) {
			in = append(in, iv)
		}
	}
	slices.SortFunc(in, func(a, b Interval) int { return a.From.Compare(b.From) })
	var out []Interval
	for _, iv := range in {
		if n := len(out); n > 0 && !iv.From.After(out[n-1].To) {
			if iv.To.After(out[n-1].To) {
				out[n-1].To = iv.To
			}
			continue
		}
		out = append(out, iv)
	}
	return out
}

// Clip returns the parts of disjoint intervals that fall within [from, to].
func Clip(intervals []Interval, from, to time.Time) []Interval {
	var out []Interval
	for _, iv := range intervals {
		if iv.From.Before(from) {
			iv.From = from
		}
		if iv.To.After(to) {
			iv.To = to
		}
		if iv.To.After(iv.From) {
			out = append(out, iv)
		}
	}
	return out
}

// Seconds returns the whole seconds inside [from, to] that the check-ins
// show: the union of every list's stretches (an open one lasting until
// to), clipped to the activity's time, summed, and rounded down.
func Seconds(checks []Check, from, to time.Time) int64 {
	var total time.Duration
	for _, iv := range Clip(Merge(Intervals(checks, to)), from, to) {
		total += iv.To.Sub(iv.From)
	}
	return int64(total / time.Second)
}

// FirstEntry returns the earliest entry among checks, or nil.
func FirstEntry(checks []Check) *time.Time {
	var first *time.Time
	for _, c := range checks {
		if c.Type == Entry && (first == nil || c.At.Before(*first)) {
			at := c.At.UTC()
			first = &at
		}
	}
	return first
}
