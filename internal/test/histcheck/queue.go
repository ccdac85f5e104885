package histcheck

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// The queue check: the admission queues of the activities created with
// one, over the history's joins, polls and signups and the authority's
// final rows (the places of each line, in the order they were taken, and
// the registrations of its activity, history.Authority). The rows' times
// are when the statement's transaction began (PostgreSQL's now()): a
// place was admitted, lapsed, sold out or seen no earlier than they say,
// perhaps later. A place is surely admitted by the first answer that
// showed its token, or took a signup carrying it.
//
//   - Admission by position: when a place was surely admitted, every place
//     of its line with a lower position had been admitted or had left the
//     line. Caught: one still waiting at the end; one admitted only after
//     that moment; one that lapsed (which happens absent_seconds after
//     its holder's last presence at the earliest) or was sold out (after
//     its last presence) only after that moment. No place is admitted
//     before the activity opens.
//   - Positions never change: a line gives each position to one place;
//     every answer that showed a user a position shows one of that user's
//     places in the authority with that position (and its token, if it
//     shows one); a user is shown no more positions than it sent joins.
//   - One admission at a time: a user holds at most one place that is not
//     expired, takes no place after one it used, and no two tokens shown
//     to a user were both live at one moment (a token lives until its
//     deadline at least).
//   - Tokens: every signup answered 201 or 202 on such an activity carried
//     a token issued to its user for that activity (shown to them, kept
//     by the authority as their place's, now used) and was answered after
//     the opening; no token made two registrations (an idempotent replay
//     answers the same one); each registration the authority kept used
//     one of its user's places, and each used place made one. No signup
//     sent after the opening is refused as closed.
//
// It assumes what a workload does: an activity's queue and opening are
// set at creation and never changed.

// QueueVerdict is the outcome of the queue check.
type QueueVerdict struct {
	// Lines are the activities created with a queue; Places the places the
	// authority kept in them, Admitted of them ever admitted; Answers the
	// joins and polls answered; Signups the signups answered 201 or 202.
	Lines, Places, Admitted, Answers, Signups int
	// Violations say what broke a promise of the queue.
	Violations []string
}

// OK reports whether the queues kept every promise.
func (v QueueVerdict) OK() bool { return len(v.Violations) == 0 }

func (v QueueVerdict) String() string {
	res := "Ok"
	if !v.OK() {
		res = "Illegal"
	}
	s := fmt.Sprintf("%-9s %-7s %4d lines, %d places (%d admitted), %d answers to joins and polls, %d signups taken",
		"queue", res, v.Lines, v.Places, v.Admitted, v.Answers, v.Signups)
	if !v.OK() {
		s += fmt.Sprintf("; %d violations, first: %s", len(v.Violations), v.Violations[0])
	}
	return s
}

// clockSlack covers the difference between the history's clock and the
// service's, for times the service reports.
const clockSlack = int64(time.Second)

// line is an activity with a queue, as created.
type line struct {
	absent  int64  // absent_seconds, in nanoseconds
	opensAt *int64 // on the history's clock; nil: none
}

// placeKey names a user's places in a line.
type holderKey struct {
	line string
	user int
}

// queueCheck gathers what the queue check reads.
type queueCheck struct {
	v     QueueVerdict
	lines map[string]line
	// places are the authority's, by line and by user of a line (nil
	// without the authority's rows).
	places    map[string][]history.Place
	byHolder  map[holderKey][]history.Place
	byToken   map[string]history.Place
	haveAuthR bool
	// seen is, for each token, when it was surely admitted: the first
	// return of an answer that showed it or of a signup it made.
	seen map[string]int64
}

func (c *queueCheck) fail(format string, args ...any) {
	c.v.Violations = append(c.v.Violations, fmt.Sprintf(format, args...))
}

// checkQueues runs the queue check on h.
func checkQueues(h history.History) QueueVerdict {
	c := &queueCheck{lines: map[string]line{}, places: map[string][]history.Place{}, byHolder: map[holderKey][]history.Place{},
		byToken: map[string]history.Place{}, seen: surelyAdmitted(h)}
	for _, op := range h.Ops {
		if op.Kind == history.CreateActivity && op.Result == history.Answered && op.Output.Status == http.StatusCreated &&
			op.Input.Key != "" && op.Input.Queue != nil {
			c.lines[op.Input.Key] = line{absent: int64(op.Input.Queue.AbsentSeconds) * int64(time.Second), opensAt: op.Input.OpensAt}
		}
	}
	c.v.Lines = len(c.lines)
	if len(c.lines) == 0 {
		return c.v
	}
	if h.Authority == nil {
		c.fail("the authority's places and registrations were not recorded: admissions cannot be checked")
	} else {
		c.haveAuthR = true
		for _, p := range h.Authority.Places {
			if _, ok := c.lines[p.Key]; !ok {
				continue
			}
			c.places[p.Key] = append(c.places[p.Key], p)
			c.byHolder[holderKey{p.Key, p.User}] = append(c.byHolder[holderKey{p.Key, p.User}], p)
			if p.Token != "" {
				if q, dup := c.byToken[p.Token]; dup {
					c.fail("token %s kept for two places: user %d's at %d and user %d's at %d", p.Token, q.User, q.Position, p.User, p.Position)
				}
				c.byToken[p.Token] = p
			}
		}
		for _, key := range slices.Sorted(maps.Keys(c.places)) {
			c.checkLine(key, c.places[key])
		}
		c.checkRegistrations(h.Authority.Registrations)
	}
	c.checkAnswers(h)
	c.checkSignups(h)
	return c.v
}

// checkLine checks one line's places as the authority kept them.
func (c *queueCheck) checkLine(key string, places []history.Place) {
	l := c.lines[key]
	c.v.Places += len(places)
	byPosition := map[int64]history.Place{}
	for _, p := range places {
		if p.AdmittedAt != 0 {
			c.v.Admitted++
		}
		if (p.State == "admitted" || p.State == "used") && (p.Token == "" || p.AdmittedAt == 0) {
			c.fail("line %s: user %d's place at %d is %s without a token", key, p.User, p.Position, p.State)
		}
		if p.AdmittedAt != 0 && p.Position == 0 {
			c.fail("line %s: user %d's place was admitted without a position", key, p.User)
		}
		if p.AdmittedAt != 0 && l.opensAt != nil && p.AdmittedAt < *l.opensAt {
			c.fail("line %s: user %d's place at %d was admitted at %d, before the opening at %d", key, p.User, p.Position, p.AdmittedAt, *l.opensAt)
		}
		if p.Position == 0 {
			continue
		}
		if q, dup := byPosition[p.Position]; dup {
			c.fail("line %s: position %d given to two places, user %d's and user %d's", key, p.Position, q.User, p.User)
		}
		byPosition[p.Position] = p
	}
	sorted := slices.Clone(places)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Position < sorted[j].Position })
	for i, y := range sorted {
		if y.AdmittedAt == 0 {
			continue
		}
		by, known := c.seen[y.Token]
		for _, x := range sorted[:i] {
			if x.Position == 0 || x.Position == y.Position {
				continue
			}
			if why := skipped(x, by, known, l.absent); why != "" {
				c.fail("line %s: position %d (user %d) admitted while position %d (user %d) %s",
					key, y.Position, y.User, x.Position, x.User, why)
				break
			}
		}
	}
	c.checkHolders(key)
}

// skipped says why place x, of a lower position, surely still waited when
// another place was admitted, surely by by if known ("" if it may not
// have).
func skipped(x history.Place, by int64, known bool, absent int64) string {
	switch {
	case x.AdmittedAt == 0 && x.State == "waiting":
		return "still waits"
	case !known:
		return ""
	case x.AdmittedAt > by+clockSlack:
		return fmt.Sprintf("was admitted only at %d, after %d", x.AdmittedAt, by)
	case x.AdmittedAt != 0:
		return ""
	case x.State == "expired" && by+clockSlack <= x.LastSeenAt+absent:
		return fmt.Sprintf("lapsed after %d (last present at %d)", by, x.LastSeenAt)
	case x.State == "sold_out" && x.LastSeenAt > by+clockSlack:
		return fmt.Sprintf("was sold out after %d (present at %d)", by, x.LastSeenAt)
	}
	return ""
}

// surelyAdmitted returns, for each token, when it was surely admitted: the
// first return of an answer that showed it, or of a signup taken with it.
func surelyAdmitted(h history.History) map[string]int64 {
	out := map[string]int64{}
	for _, op := range h.Ops {
		o := op.Output
		token := ""
		switch {
		case op.Result != history.Answered:
		case (op.Kind == history.JoinQueue || op.Kind == history.ReadQueue) && o.Status == http.StatusOK:
			token = o.Token
		case op.Kind == history.Signup && (o.Status == http.StatusCreated || o.Status == http.StatusAccepted):
			token = op.Input.AdmissionToken
		}
		if t, seen := out[token]; token != "" && (!seen || op.Return < t) {
			out[token] = op.Return
		}
	}
	return out
}

// checkHolders checks that each user of a line held one live place at a
// time, and took none after one it used (a used place never expires).
func (c *queueCheck) checkHolders(key string) {
	var users []int
	for k := range c.byHolder {
		if k.line == key {
			users = append(users, k.user)
		}
	}
	slices.Sort(users)
	for _, u := range users {
		places := c.byHolder[holderKey{key, u}]
		live := 0
		for i, p := range places {
			if p.State != "expired" {
				live++
			}
			if p.State == "used" && i < len(places)-1 {
				c.fail("line %s: user %d took a place (position %d) after the one they used (position %d)",
					key, u, places[i+1].Position, p.Position)
			}
		}
		if live > 1 {
			c.fail("line %s: user %d holds %d places that are not expired", key, u, live)
		}
	}
}

// checkRegistrations checks that every registration of a line's activity
// used one of its user's places, and every used place made one.
func (c *queueCheck) checkRegistrations(regs []history.Registration) {
	count := map[holderKey]int{}
	for _, r := range regs {
		if _, ok := c.lines[r.Key]; ok {
			count[holderKey{r.Key, r.User}]++
		}
	}
	used := map[holderKey]int{}
	for k, places := range c.byHolder {
		for _, p := range places {
			if p.State == "used" {
				used[k]++
			}
		}
	}
	keys := map[holderKey]bool{}
	for k := range count {
		keys[k] = true
	}
	for k := range used {
		keys[k] = true
	}
	for _, k := range sortedHolders(keys) {
		if count[k] != used[k] {
			c.fail("line %s: user %d has %d registrations and %d used admission tokens", k.line, k.user, count[k], used[k])
		}
	}
}

func sortedHolders(m map[holderKey]bool) []holderKey {
	out := make([]holderKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].line != out[j].line {
			return out[i].line < out[j].line
		}
		return out[i].user < out[j].user
	})
	return out
}

// shown is a token as answers showed it to a user: when first, and its
// deadline.
type shown struct {
	first, expires int64
	position       int64
}

// checkAnswers checks the answers to joins and polls against each other
// and against the authority's places.
func (c *queueCheck) checkAnswers(h history.History) {
	joins := map[holderKey]int{}
	positions := map[holderKey]map[int64]bool{}
	owner := map[string]map[int64]int{} // line → position → the user shown it
	tokens := map[holderKey]map[string]*shown{}
	for _, op := range h.Ops {
		if op.Kind != history.JoinQueue && op.Kind != history.ReadQueue {
			continue
		}
		if _, ok := c.lines[op.Input.Key]; !ok {
			continue
		}
		k := holderKey{op.Input.Key, op.Input.User}
		if op.Kind == history.JoinQueue && op.Result != history.Refused {
			joins[k]++
		}
		o := op.Output
		if op.Result != history.Answered || o.Status != http.StatusOK {
			continue
		}
		c.v.Answers++
		if p := o.QueuePosition; p > 0 {
			if positions[k] == nil {
				positions[k] = map[int64]bool{}
			}
			positions[k][p] = true
			if owner[k.line] == nil {
				owner[k.line] = map[int64]int{}
			}
			if u, seen := owner[k.line][p]; seen && u != k.user {
				c.fail("line %s: position %d shown to user %d and to user %d", k.line, p, u, k.user)
			}
			owner[k.line][p] = k.user
			if c.haveAuthR && !slices.ContainsFunc(c.byHolder[k], func(q history.Place) bool { return q.Position == p }) {
				c.fail("line %s: user %d was shown position %d (op %d), which none of their places has", k.line, k.user, p, op.ID)
			}
		}
		if o.Token != "" {
			if tokens[k] == nil {
				tokens[k] = map[string]*shown{}
			}
			if s := tokens[k][o.Token]; s == nil {
				tokens[k][o.Token] = &shown{first: op.Return, expires: o.TokenExpires, position: o.QueuePosition}
			} else {
				s.first = min(s.first, op.Return)
			}
			if c.haveAuthR {
				p, ok := c.byToken[o.Token]
				switch {
				case !ok || p.Key != k.line || p.User != k.user:
					c.fail("line %s: user %d was shown token %s (op %d), which is not one of their places'", k.line, k.user, o.Token, op.ID)
				case p.Position != o.QueuePosition || p.AdmittedAt == 0:
					c.fail("line %s: user %d was shown token %s at position %d (op %d); the authority keeps it at %d", k.line, k.user,
						o.Token, o.QueuePosition, op.ID, p.Position)
				}
			}
		}
	}
	for _, k := range sortedHolderKeys(positions) {
		if n := len(positions[k]); n > joins[k] {
			c.fail("line %s: user %d was shown %d positions after %d joins: a position moved", k.line, k.user, n, joins[k])
		}
	}
	for _, k := range sortedHolderKeys(tokens) {
		ts := slices.Sorted(maps.Keys(tokens[k]))
		for i, a := range ts {
			for _, b := range ts[i+1:] {
				x, y := tokens[k][a], tokens[k][b]
				if max(x.first, y.first)+clockSlack < min(x.expires, y.expires) {
					c.fail("line %s: user %d held two live admissions, tokens %s and %s, at %d", k.line, k.user, a, b, max(x.first, y.first))
				}
			}
		}
	}
}

func sortedHolderKeys[V any](m map[holderKey]V) []holderKey {
	keys := map[holderKey]bool{}
	for k := range m {
		keys[k] = true
	}
	return sortedHolders(keys)
}

// checkSignups checks the signups taken on the lines' activities: each
// with a token of its user's, after the opening, no token twice.
func (c *queueCheck) checkSignups(h history.History) {
	issued := map[holderKey]map[string]bool{}
	for _, op := range h.Ops {
		if (op.Kind == history.JoinQueue || op.Kind == history.ReadQueue) && op.Result == history.Answered && op.Output.Token != "" {
			k := holderKey{op.Input.Key, op.Input.User}
			if issued[k] == nil {
				issued[k] = map[string]bool{}
			}
			issued[k][op.Output.Token] = true
		}
	}
	made := map[string]string{} // token → the registration it made
	for _, op := range h.Ops {
		l, ok := c.lines[op.Input.Key]
		o := op.Output
		if !ok || op.Kind != history.Signup || op.Result != history.Answered {
			continue
		}
		if refused(o, "registration_closed") && l.opensAt != nil && op.Call > *l.opensAt+clockSlack {
			c.fail("line %s: user %d's signup sent at %d, after the opening at %d, was refused as closed (op %d)",
				op.Input.Key, op.Input.User, op.Call, *l.opensAt, op.ID)
		}
		if o.Status != http.StatusCreated && o.Status != http.StatusAccepted {
			continue
		}
		c.v.Signups++
		k, t := holderKey{op.Input.Key, op.Input.User}, op.Input.AdmissionToken
		switch {
		case t == "":
			c.fail("line %s: user %d's registration %s was made without an admission token (op %d)", k.line, k.user, o.Registration, op.ID)
			continue
		case !issued[k][t]:
			c.fail("line %s: user %d's registration %s was made with token %s, never issued to them (op %d)", k.line, k.user, o.Registration, t, op.ID)
		case c.haveAuthR:
			if p, kept := c.byToken[t]; !kept || p.Key != k.line || p.User != k.user || p.State != "used" {
				c.fail("line %s: user %d's registration %s was made with token %s, which the authority does not keep as their used place's (op %d)",
					k.line, k.user, o.Registration, t, op.ID)
			}
		}
		if l.opensAt != nil && op.Return+clockSlack < *l.opensAt {
			c.fail("line %s: user %d's registration %s was answered at %d, before the opening at %d", k.line, k.user, o.Registration, op.Return, *l.opensAt)
		}
		if r, seen := made[t]; seen && r != o.Registration {
			c.fail("line %s: token %s made two registrations, %s and %s", k.line, t, r, o.Registration)
		}
		made[t] = o.Registration
	}
}
