// Package histcheck checks a recorded history of capacityd's clients
// against the service's promises with porcupine, a linearizability
// checker:
//
//   - the authority: every activity behaves as one sequence of seat
//     changes and its authoritative reads (GET /v1/activities/{id}) return
//     the counts of that sequence. A registration holds a party's seats,
//     all or nothing, and taken counts seats. A signup is admitted when
//     the activity's waiting-list policy would seat it from the end of the
//     line (strict: its seats are free and nobody waits; fill: its seats
//     are free), else waitlisted in join order with its place in line, else
//     refused as full with the seats remaining; one active registration
//     per user; idempotent replays; every release (a cancellation, a seat
//     reduction, a capacity raise) promotes by the policy — strict: the
//     head, while it fits; fill: every party that fits, oldest first;
//   - the display: a seat read (GET …/seats) never shows more seats taken
//     than the authority at some moment of the read plus the seats of the
//     signups, cancellations and seat reductions in flight then (and what
//     faults or unanswered requests may have left behind, for the
//     counters' lifetime);
//   - the notes: every answered view and water carries the counters right
//     after its own increment, and stats reads the counters as they are;
//   - the pools: a signup must also fit every pool of its activity, and a
//     release promotes across the pool. Each activity in pools is checked
//     on its own, the pools' free seats unknown to it (pooled.go); over the
//     merged history, the registrations of a pool's activities that surely
//     occupy seats never hold more than its capacity, and its reads agree
//     (pools.go); every authoritative activity read shows a quiet line: no
//     party the activity's policy would promote fits the remaining seats
//     of the activity and its pools;
//   - confirmations and the service's own releases (lifecycle.go): a
//     confirmed registration stays so; a release, read from the event log
//     as an operation of the service, frees only seated registrations
//     (for "unconfirmed", none whose confirmation was answered) and
//     promotes the line by the policy in its own transaction; what the
//     moments and the doors decide is the release check's (release.go);
//   - the queues: admission in position order, positions that never
//     change, one admission per user at a time, and every signup taken on
//     an activity with a queue made with a token issued to its user, no
//     token twice (queue.go; it also reads the authority's final rows).
//
// Attempts without an answer are operations of unknown outcome: they may
// or may not have taken effect, so they get an open-ended return time.
// Retries of a signup with the same Idempotency-Key, and of a cancel, are
// one operation. A 503 answer promises that nothing was written.
package histcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// Options tune a check.
type Options struct {
	// OrphanWindow is how long a display hold may outlive a signup attempt
	// that got no answer or overlapped a fault: the longest a request may
	// still run after its client gave up, plus the display counters' TTL.
	OrphanWindow time.Duration
	// FaultSlack is how long after a fault ends its effects still count as
	// the fault's (reconnections, the display tier's suspension).
	FaultSlack time.Duration
	// Timeout bounds the check of each partition; 0: none. A partition not
	// decided in time makes the verdict Unknown, never Ok.
	Timeout time.Duration
	// Parallel is the number of partitions checked at once (default 2).
	Parallel int
}

// Verdict is the outcome of checking one model.
type Verdict struct {
	// Model is "authority", "display" or "notes".
	Model string
	// Result is Ok, Illegal (some partition has no linearization) or
	// Unknown (a partition was not decided within the timeout).
	Result porcupine.CheckResult
	// Partitions (activities or notes), Operations checked, and how many
	// had no answer.
	Partitions, Operations, Unknown int
	// Failed names the partitions without a linearization; Undecided those
	// not decided in time.
	Failed, Undecided []string

	model porcupine.Model
	infos map[string]porcupine.LinearizationInfo
	parts map[string][]porcupine.Operation
}

// Witness explains why a failed partition has no linearization: the state
// after the longest sequence of its operations the checker could explain,
// and the first operation (by response time) left over, which no order
// explains after it.
func (v Verdict) Witness(key string) string {
	info, ok := v.infos[key]
	if !ok {
		return ""
	}
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	type id struct {
		call, ret int64
		client    int
	}
	done := map[id]bool{}
	state := v.model.Init()
	for _, op := range longest {
		done[id{op.Call, op.Return, op.ClientId}] = true
		_, state = v.model.Step(state, op.Input, op.Output)
	}
	var next *porcupine.Operation
	for i, op := range v.parts[key] {
		if !done[id{op.Call, op.Return, op.ClientId}] && (next == nil || op.Return < next.Return) {
			next = &v.parts[key][i]
		}
	}
	if next == nil {
		return ""
	}
	return fmt.Sprintf("%s: after %d of %d operations the state is %q, and no order explains %q (client %d, %v)",
		key, len(longest), len(v.parts[key]), v.model.DescribeState(state),
		v.model.DescribeOperation(next.Input, next.Output), next.ClientId, next.Metadata)
}

// Report is the outcome of a check.
type Report struct {
	Authority, Display, Notes Verdict
	// Pools is the check of what pools hold across their activities.
	Pools PoolVerdict
	// Series is the check of what each user holds across a series'
	// activities.
	Series SeriesVerdict
	// Queue is the check of the admission queues.
	Queue QueueVerdict
	// Anomalies are answers the API never gives (5xx other than 503).
	Anomalies []string
}

// OK reports whether every model's verdict is Ok and nothing anomalous
// was answered.
func (r Report) OK() bool {
	return r.Authority.Result == porcupine.Ok && r.Display.Result == porcupine.Ok &&
		r.Notes.Result == porcupine.Ok && r.Pools.OK() && r.Series.OK() && r.Queue.OK() && len(r.Anomalies) == 0
}

// String summarises the report in a few lines.
func (r Report) String() string {
	var b strings.Builder
	for _, v := range []Verdict{r.Authority, r.Display, r.Notes} {
		fmt.Fprintf(&b, "%-9s %-7s %4d partitions, %6d operations (%d without an answer)", v.Model, v.Result, v.Partitions, v.Operations, v.Unknown)
		if len(v.Failed) > 0 {
			fmt.Fprintf(&b, "; not linearizable: %s\n  for example %s", some(v.Failed), v.Witness(v.Failed[0]))
		}
		if len(v.Undecided) > 0 {
			fmt.Fprintf(&b, "; undecided: %s", some(v.Undecided))
		}
		b.WriteString("\n")
	}
	b.WriteString(r.Pools.String() + "\n")
	b.WriteString(r.Series.String() + "\n")
	b.WriteString(r.Queue.String() + "\n")
	if len(r.Anomalies) > 0 {
		fmt.Fprintf(&b, "anomalies: %d, first: %s\n", len(r.Anomalies), r.Anomalies[0])
	}
	return b.String()
}

// some lists the first few keys and how many more there are.
func some(keys []string) string {
	if len(keys) <= 4 {
		return strings.Join(keys, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(keys[:4], ", "), len(keys)-4)
}

// Check checks h. The search allocates a state for every step it tries,
// and most of them are garbage at once: the collector runs less often
// while it lasts (a third of the time of a hard partition went to it).
func Check(h history.History, o Options) Report {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	if o.Parallel <= 0 {
		o.Parallel = 2
	}
	ops := fold(h)
	end := lastReturn(h)
	var acts, display, notes []porcupine.Operation
	allowances := allowances(h, o)
	poolSeats := leastPoolSeats(h)
	for _, l := range ops {
		ret := l.ret
		if l.unknown {
			ret = end
		}
		meta := fmt.Sprintf("%s, %d attempt(s)", l.instance, l.attempts)
		op := history.Op{Kind: l.kind, Input: l.input, Client: l.client, Instance: l.instance}
		switch l.kind {
		case history.CreatePool, history.ReadPool, history.CreateSeries, history.JoinQueue, history.ReadQueue:
			continue // the pool, series and queue checks read them from the history
		case history.NoteView, history.NoteWater, history.NoteStats:
			notes = append(notes, porcupine.Operation{ClientId: l.client, Input: noteInput{op}, Call: l.call,
				Output: noteOutput{l.out, l.unknown}, Return: ret, Metadata: meta})
		default:
			in := activityInput{op: op}
			switch l.kind {
			case history.ReadSeats:
				in.allowance = allowances[seatKey{l.input.Key, l.call, l.ret}]
			case history.CreateActivity:
				in.poolSeats = poolSeats[l.input.Key]
			}
			p := porcupine.Operation{ClientId: l.client, Input: in, Call: l.call,
				Output: activityOutput{l.out, l.unknown}, Return: ret, Metadata: meta}
			display = append(display, p)
			if l.kind != history.ReadSeats {
				acts = append(acts, p)
			}
		}
	}
	r := Report{
		Authority: checkModel("authority", activityModel(false), acts, o),
		Display:   checkModel("display", activityModel(true), display, o),
		Notes:     checkModel("notes", noteModel(), notes, o),
		Pools:     checkPools(h),
		Series:    checkSeries(h, ops),
		Queue:     checkQueues(h),
	}
	for _, op := range h.Ops {
		if op.Result == history.Answered && op.Output.Status >= 500 && op.Output.Status != 503 {
			r.Anomalies = append(r.Anomalies, fmt.Sprintf("op %d %s on %s: %d %s", op.ID, op.Kind, op.Instance, op.Output.Status, op.Output.Code))
		}
	}
	return r
}

// checkModel checks each partition of ops on its own, a few at once.
func checkModel(name string, m porcupine.Model, ops []porcupine.Operation, o Options) Verdict {
	v := Verdict{Model: name, Result: porcupine.Ok, model: m, infos: map[string]porcupine.LinearizationInfo{},
		parts: map[string][]porcupine.Operation{}}
	parts := m.Partition(ops)
	v.Partitions, v.Operations = len(parts), len(ops)
	for _, op := range ops {
		switch out := op.Output.(type) {
		case activityOutput:
			v.Unknown += b2i(out.unknown)
		case noteOutput:
			v.Unknown += b2i(out.unknown)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, o.Parallel)
	for _, part := range parts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res, info := porcupine.CheckOperationsVerbose(m, part, o.Timeout)
			key := keyOf(part[0].Input)
			mu.Lock()
			defer mu.Unlock()
			switch res {
			case porcupine.Illegal:
				v.Failed = append(v.Failed, key)
				v.infos[key], v.parts[key] = info, part
				v.Result = porcupine.Illegal
			case porcupine.Unknown:
				v.Undecided = append(v.Undecided, key)
				if v.Result == porcupine.Ok {
					v.Result = porcupine.Unknown
				}
			}
		})
	}
	wg.Wait()
	sort.Strings(v.Failed)
	sort.Strings(v.Undecided)
	return v
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

type seatKey struct {
	key       string
	call, ret int64
}

// allowances computes, for every answered seat read, by how much the
// display may exceed the authority during the read: by the seats of the
// signups that hold them before they reach the authority, and of the
// cancellations, seat reductions and the service's releases whose freed
// seats are shown only after their commit — the attempts in flight then,
// and those that got no answer or overlapped a fault (whose instance may
// have died between the two steps) within OrphanWindow before it.
func allowances(h history.History, o Options) map[seatKey]int {
	type span struct {
		from, to int64
		seats    int
	}
	var faults []span
	for _, f := range h.Faults {
		end := f.End
		if end == 0 {
			end = lastReturn(h)
		}
		faults = append(faults, span{from: f.Start, to: end + int64(o.FaultSlack)})
	}
	overlapsFault := func(s span) bool {
		for _, f := range faults {
			if s.from <= f.to && f.from <= s.to {
				return true
			}
		}
		return false
	}
	maxSeats := map[string]int{}
	for _, op := range h.Ops {
		if op.Kind == history.CreateActivity && op.Input.Key != "" {
			maxSeats[op.Input.Key] = max(op.Input.MaxSeats, 1)
		}
	}
	holds := map[string][]span{}
	for _, op := range h.Ops {
		if op.Result == history.Refused || (op.Kind != history.Signup && op.Kind != history.Cancel && op.Kind != history.ReduceSeats && op.Kind != Release) {
			continue
		}
		s := span{from: op.Call, to: op.Return, seats: heldSeats(op, max(maxSeats[op.Input.Key], 1))}
		if op.Result == history.Unknown || overlapsFault(s) {
			s.to += int64(o.OrphanWindow)
		}
		holds[op.Input.Key] = append(holds[op.Input.Key], s)
	}
	out := map[seatKey]int{}
	for _, op := range h.Ops {
		if op.Kind != history.ReadSeats || op.Result != history.Answered {
			continue
		}
		n := 0
		for _, s := range holds[op.Input.Key] {
			if s.from <= op.Return && op.Call <= s.to {
				n += s.seats
			}
		}
		out[seatKey{op.Input.Key, op.Call, op.Return}] = n
	}
	return out
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// WriteArtifacts writes, when the report is not OK, the history as JSON
// and porcupine's visualization of each partition that has no
// linearization (at most three per model) as HTML into dir, named after
// prefix. It returns the paths written.
func (r Report) WriteArtifacts(dir, prefix string, h history.History) ([]string, error) {
	if r.OK() {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	prefix = unsafeName.ReplaceAllString(prefix, "_")
	path := filepath.Join(dir, prefix+"-history.json")
	if err := h.WriteFile(path); err != nil {
		return nil, err
	}
	paths := []string{path}
	for _, v := range []Verdict{r.Authority, r.Display, r.Notes} {
		written := 0
		for _, key := range v.Failed {
			if written == 3 || (v.Model == "display" && slices.Contains(r.Authority.Failed, key)) {
				continue // the authority's visualization shows it
			}
			written++
			p := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.html", prefix, v.Model, unsafeName.ReplaceAllString(key, "_")))
			if err := porcupine.VisualizePath(v.model, v.infos[key], p); err != nil {
				return paths, err
			}
			paths = append(paths, p)
		}
	}
	return paths, nil
}
