package chaos

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd/internal/test/histcheck"
	"github.com/physiciansnet/capacityd/internal/test/history"
)

// Result is what a run observed and the check's verdict.
type Result struct {
	History history.History
	Report  histcheck.Report
	// Faults counts the faults injected by class.
	Faults map[Class]int
	// Converged is nil when every activity's display equalled the
	// authority within twice the TTL once the faults and the workload
	// stopped.
	Converged error
	// Violations are exchanges that broke the API description.
	Violations []string
	// Recoveries are, for each postgres_failover, the time from the
	// primary's SIGKILL to the answer of the first signup sent after it
	// that was taken (201 or 202).
	Recoveries []time.Duration
	// Cluster is what the run ran on (still running until the test ends).
	Cluster *Cluster
	// CheckTook is how long the check of the history took.
	CheckTook time.Duration
	// Doors is the door check of the check-in lists the workload scanned
	// at.
	Doors histcheck.DoorVerdict
	// Releases is the release check of every activity's event log.
	Releases histcheck.ReleaseVerdict
}

// OK reports whether the run kept every promise.
func (r Result) OK() bool {
	return r.Report.OK() && r.Converged == nil && len(r.Violations) == 0 && r.Doors.OK() && r.Releases.OK()
}

// Summary describes the run in a few lines: operations, parties, faults,
// verdicts.
func (r Result) Summary() string {
	var b strings.Builder
	kinds := map[history.Kind]int{}
	results := map[history.Result]int{}
	logical := map[int]bool{}
	for _, op := range r.History.Ops {
		kinds[op.Kind]++
		results[op.Result]++
		logical[op.Logical] = true
	}
	fmt.Fprintf(&b, "operations: %d requests (%d logical operations): %d answered, %d without an answer, %d refused connections\n",
		len(r.History.Ops), len(logical), results[history.Answered], results[history.Unknown], results[history.Refused])
	var names []string
	for k := range kinds {
		names = append(names, string(k))
	}
	sort.Strings(names)
	b.WriteString("  by kind:")
	for _, k := range names {
		fmt.Fprintf(&b, " %s %d", k, kinds[history.Kind(k)])
	}
	p := PartiesOf(r.History)
	fmt.Fprintf(&b, "\nparties: %d activities take parties (%d strict, %d fill); %d signups for 2-%d seats answered (%d seated, %d waitlisted, %d full); %d seat reductions answered (%d to fewer seats than known)",
		p.Activities, p.Strict, p.Activities-p.Strict, p.Signups, maxParty, p.Seated, p.Waitlisted, p.Full, p.Reductions, p.Reduced)
	pl := PoolsOf(r.History)
	fmt.Fprintf(&b, "\npools: %d created; %d activities in one pool, %d in two; %d signups on them answered (%d seated, %d waitlisted, %d full); %d pool reads answered (%d of a full pool, %d with reserved seats); %d activities in pools with blocks",
		pl.Pools, pl.InOne, pl.InTwo, pl.Signups, pl.Seated, pl.Waitlisted, pl.Full, pl.Reads, pl.FullReads, pl.ReservedReads, pl.Blocked)
	bl := BlocksOf(r.History)
	fmt.Fprintf(&b, "\nblocks: %d created (%d refused full), %d deleted (%d found gone); %d signups with a code answered (%d seated, %d waitlisted, %d full, %d refused for a code no live block has); %d activity reads with reserved seats",
		bl.Created, bl.Full, bl.Deleted, bl.Gone, bl.Signups, bl.Seated, bl.Waitlisted, bl.SignupsFull, bl.BadCode, bl.ReservedReads)
	fmt.Fprintf(&b, "\n  roles: %d blocks for a role created; %d signups with the role answered (%d with a code too): %d seated from a block of the role, %d from a block of a code, %d on public seats, %d waitlisted, %d full; %d signups with another role answered (%d seated from a block)",
		bl.RoleBlocks, bl.RoleSignups, bl.RoleAndCode, bl.FromRoleBlock, bl.RoleFromCodeBlock, bl.RolePublic, bl.RoleWaitlisted, bl.RoleFull,
		bl.OtherRoleSignups, bl.OtherRoleFromBlock)
	se := SeriesOf(r.History)
	fmt.Fprintf(&b, "\nseries: %d created; %d activities in series; %d signups on them answered (%d taken, %d at the limit)",
		se.Series, se.Activities, se.Signups, se.Taken, se.LimitReached)
	sa := SalesOf(r.History)
	fmt.Fprintf(&b, "\non-sale: %d joins and %d polls answered; %d signups answered (%d taken, %d of them replayed, %d before the opening, %d without a valid token, %d full); %d places (%d admitted, %d of them expired unused; %d lapsed, %d sold out)",
		sa.Joins, sa.Polls, sa.Signups, sa.Taken, sa.Replayed, sa.Closed, sa.Refused, sa.Full, sa.Places, sa.Admitted, sa.TokensExpired, sa.Lapsed, sa.SoldOut)
	lc := LifecycleOf(r.History)
	fmt.Fprintf(&b, "\nconfirmations: %d answered (%d confirmed, %d closed, %d with no seat); releases by the service: %d transactions, %d released, %d promoted with them",
		lc.Confirms, lc.Confirmed, lc.Closed, lc.Invalid, lc.Releases, lc.Released, lc.Promoted)
	b.WriteString("\nfaults:")
	total := 0
	for _, cl := range everyClass {
		if n, ok := r.Faults[cl]; ok {
			fmt.Fprintf(&b, " %s %d", cl, n)
			total += n
		}
	}
	fmt.Fprintf(&b, " (%d in all)\n", total)
	if len(r.Recoveries) > 0 {
		fmt.Fprintf(&b, "failovers: first signup answered %v after the primary's SIGKILL\n", r.Recoveries)
	}
	fmt.Fprintf(&b, "check: %s\n", r.CheckTook.Round(time.Millisecond))
	b.WriteString(r.Report.String())
	if r.Converged != nil {
		fmt.Fprintf(&b, "display convergence: %v\n", r.Converged)
	} else {
		b.WriteString("display convergence: every activity's display equals the authority\n")
	}
	if len(r.Violations) > 0 {
		fmt.Fprintf(&b, "API description violations: %d, first: %s\n", len(r.Violations), r.Violations[0])
	}
	fmt.Fprintf(&b, "doors: %d check-ins recorded, %d answered", r.Doors.CheckIns, r.Doors.Answers)
	if r.Doors.OK() {
		b.WriteString(": every list kept its promises\n")
	} else {
		fmt.Fprintf(&b, ": %d violations, first: %s\n", len(r.Doors.Violations), r.Doors.Violations[0])
	}
	b.WriteString(r.Releases.String() + "\n")
	verdict := "OK"
	if !r.OK() {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "verdict: %s", verdict)
	return b.String()
}

// Recoveries returns, for each postgres_failover fault of h, the time
// from its start (the primary's SIGKILL) to the answer of the first
// signup sent after it that was taken (201 or 202).
func Recoveries(h history.History) []time.Duration {
	var out []time.Duration
	for _, f := range h.Faults {
		if f.Class != string(PostgresFailover) {
			continue
		}
		first := int64(-1)
		for _, op := range h.Ops {
			if op.Kind == history.Signup && op.Call >= f.Start && op.Result == history.Answered &&
				(op.Output.Status == http.StatusCreated || op.Output.Status == http.StatusAccepted) &&
				(first < 0 || op.Return < first) {
				first = op.Return
			}
		}
		if first >= 0 {
			out = append(out, time.Duration(first-f.Start))
		}
	}
	return out
}
