package histcheck

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// The series check: what a user holds across a series' activities, over
// the merged history of all of them (each activity's partition knows only
// that a signup may be refused at the limit). A user holds at most the
// series' max_per_user active (occupying or waitlisted) registrations
// among its activities, and user u of each of them is the same person.
//
//   - A registration is surely active from the first answer that showed
//     it so (a signup's 201 or 202, a status change's or seat reduction's
//     200, an already_registered refusal naming it) until the first call
//     of a cancellation naming it, or the start of the service's release
//     of it. At no moment may a user surely hold more than max_per_user.
//   - A registration may be active from the call of the signup that made
//     it, unless that signup was surely refused, until the answer of a
//     cancellation of it or the end of a release of it (a signup without
//     an answer: for ever). A
//     limit_reached refusal must have met, at some moment between its
//     call and its answer, max_per_user registrations the user may have
//     held, and name at least that many when it names them.
//
// It assumes what a workload does: a series' limit and an activity's
// series are set at creation and never changed.

// SeriesVerdict is the outcome of the series check.
type SeriesVerdict struct {
	// Series created, Activities created in series, Registrations seen
	// active in them, and limit_reached Refusals checked.
	Series, Activities, Registrations, Refusals int
	// Violations say what broke a user's limit, or which refusal had no
	// reason.
	Violations []string
}

// OK reports whether no user was found over a series' limit and every
// refusal at the limit had its reason.
func (v SeriesVerdict) OK() bool { return len(v.Violations) == 0 }

func (v SeriesVerdict) String() string {
	res := "Ok"
	if !v.OK() {
		res = "Illegal"
	}
	s := fmt.Sprintf("%-9s %-7s %4d series, %d activities in series, %d registrations seen active, %d refusals at the limit",
		"series", res, v.Series, v.Activities, v.Registrations, v.Refusals)
	if !v.OK() {
		s += fmt.Sprintf("; %d violations, first: %s", len(v.Violations), v.Violations[0])
	}
	return s
}

// person is a user of a series.
type person struct {
	series string
	user   int
}

// span is when a registration is (surely or maybe) active.
type span struct{ from, until int64 }

// checkSeries runs the series check on h, whose logical operations are
// ops (fold(h)).
func checkSeries(h history.History, ops []logical) SeriesVerdict {
	var v SeriesVerdict
	limit := map[string]int{}
	var order []string
	inSeries := map[string]string{} // activity → its series
	for _, op := range h.Ops {
		if op.Result != history.Answered || op.Output.Status != http.StatusCreated || op.Input.Key == "" {
			continue
		}
		switch {
		case op.Kind == history.CreateSeries:
			if _, seen := limit[op.Input.Key]; !seen {
				order = append(order, op.Input.Key)
			}
			limit[op.Input.Key] = op.Input.MaxPerUser
		case op.Kind == history.CreateActivity && op.Input.Series != "":
			inSeries[op.Input.Key] = op.Input.Series
		}
	}
	v.Series, v.Activities = len(order), len(inSeries)
	if len(inSeries) == 0 {
		return v
	}
	sure := surelyActive(h, inSeries)
	for _, p := range sortedPeople(sure) {
		var changes []change
		for id, s := range sure[p] {
			v.Registrations++
			changes = append(changes, change{at: s.from, delta: 1, reg: id})
			if s.until != math.MaxInt64 {
				changes = append(changes, change{at: s.until, delta: -1, reg: id})
			}
		}
		if first := overLimit(changes, limit[p.series]); first != "" {
			v.Violations = append(v.Violations, fmt.Sprintf("user %d of series %s (at most %d): %s", p.user, p.series, limit[p.series], first))
		}
	}
	maybe := maybeActive(ops, inSeries)
	for _, l := range ops {
		if l.kind != history.Signup || l.unknown || inSeries[l.input.Key] == "" || !refused(l.out, "limit_reached") {
			continue
		}
		v.Refusals++
		p := person{inSeries[l.input.Key], l.input.User}
		most, n := limit[p.series], mostAt(maybe[p], l.call, l.ret)
		switch {
		case n < most:
			v.Violations = append(v.Violations, fmt.Sprintf("user %d refused at the limit of series %s (%d) on %s from %d to %d, holding at most %d",
				p.user, p.series, most, l.input.Key, l.call, l.ret, n))
		case len(l.out.Registrations) > 0 && len(l.out.Registrations) < most:
			v.Violations = append(v.Violations, fmt.Sprintf("user %d refused at the limit of series %s (%d) on %s naming %d registrations",
				p.user, p.series, most, l.input.Key, len(l.out.Registrations)))
		}
	}
	return v
}

// overLimit adds a person's changes up in time (at equal times, ends
// before starts) and describes the first moment more than most
// registrations were surely active ("" if never).
func overLimit(changes []change, most int) string {
	sort.Slice(changes, func(i, j int) bool {
		if changes[i].at != changes[j].at {
			return changes[i].at < changes[j].at
		}
		return changes[i].delta < changes[j].delta
	})
	holding := map[string]int{}
	for _, c := range changes {
		holding[c.reg] += c.delta
		if holding[c.reg] == 0 {
			delete(holding, c.reg)
		}
		if len(holding) > most {
			ids := slices.Sorted(maps.Keys(holding))
			return fmt.Sprintf("at %d %d registrations were surely active: %s", c.at, len(ids), strings.Join(ids, ", "))
		}
	}
	return ""
}

func sortedPeople(m map[person]map[string]span) []person {
	out := make([]person, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].series != out[j].series {
			return out[i].series < out[j].series
		}
		return out[i].user < out[j].user
	})
	return out
}

// surelyActive returns, for each person, when each registration the
// history shows active surely was.
func surelyActive(h history.History, inSeries map[string]string) map[person]map[string]span {
	regs := map[string]*span{}
	owner := map[string]person{}
	for _, op := range h.Ops {
		o := op.Output
		if op.Result != history.Answered || o.Registration == "" || inSeries[op.Input.Key] == "" {
			continue
		}
		switch {
		case op.Kind == history.Signup && (o.Status == http.StatusCreated || o.Status == http.StatusAccepted) && active(o.RegStatus),
			op.Kind == history.Signup && refused(o, "already_registered"),
			(op.Kind == history.SetStatus || op.Kind == history.ReduceSeats) && o.Status == http.StatusOK && active(o.RegStatus):
		default:
			continue
		}
		if r, seen := regs[o.Registration]; !seen {
			regs[o.Registration] = &span{from: op.Return, until: math.MaxInt64}
			owner[o.Registration] = person{inSeries[op.Input.Key], op.Input.User}
		} else {
			r.from = min(r.from, op.Return)
		}
	}
	for _, op := range h.Ops {
		if r := regs[op.Input.Registration]; r != nil && op.Kind == history.Cancel && op.Result != history.Refused {
			r.until = min(r.until, op.Call)
		}
		if op.Kind == Release {
			released, _ := ReleaseOf(op.Output)
			for _, id := range released {
				if r := regs[id]; r != nil {
					r.until = min(r.until, op.Call)
				}
			}
		}
	}
	out := map[person]map[string]span{}
	for id, r := range regs {
		if r.until <= r.from {
			continue
		}
		p := owner[id]
		if out[p] == nil {
			out[p] = map[string]span{}
		}
		out[p][id] = *r
	}
	return out
}

func active(status string) bool { return occupying(status) || status == waitlisted }

// maybeActive returns, for each person, when each signup's registration
// may have been active: from the signup's call, unless it was surely
// refused, until the answer of a cancellation of it.
func maybeActive(ops []logical, inSeries map[string]string) map[person][]span {
	cancelledAt := map[string]int64{}
	ended := func(id string, at int64) {
		if t, seen := cancelledAt[id]; !seen || at < t {
			cancelledAt[id] = at
		}
	}
	for _, l := range ops {
		if l.kind == history.Cancel && !l.unknown && ok(l.out, http.StatusOK) && l.out.RegStatus == cancelled {
			ended(l.input.Registration, l.ret)
		}
		if l.kind == Release {
			released, _ := ReleaseOf(l.out)
			for _, id := range released {
				ended(id, l.ret)
			}
		}
	}
	out := map[person][]span{}
	for _, l := range ops {
		if l.kind != history.Signup || inSeries[l.input.Key] == "" {
			continue
		}
		until := int64(math.MaxInt64)
		if !l.unknown {
			if l.out.Status != http.StatusCreated && l.out.Status != http.StatusAccepted {
				continue
			}
			if t, seen := cancelledAt[l.out.Registration]; seen {
				until = t
			}
		}
		p := person{inSeries[l.input.Key], l.input.User}
		out[p] = append(out[p], span{from: l.call, until: until})
	}
	return out
}

// mostAt returns the most spans that cover one moment between call and
// ret.
func mostAt(spans []span, call, ret int64) int {
	most := 0
	for _, t := range append([]int64{call}, startsWithin(spans, call, ret)...) {
		n := 0
		for _, s := range spans {
			if s.from <= t && t <= s.until {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

func startsWithin(spans []span, call, ret int64) []int64 {
	var out []int64
	for _, s := range spans {
		if s.from > call && s.from <= ret {
			out = append(out, s.from)
		}
	}
	return out
}
