package loadtest

import (
	"fmt"
	"strings"
)

// FlashCrowdCapacity is the number of seats the flash crowd competes for.
const FlashCrowdCapacity = 500

// Target is one performance target from the issues, judged against a
// report.
type Target struct {
	// Issue is the issue that sets the target; 0 for the webhook targets.
	Issue int
	// What names the measure, as in the report.
	What string
	// Want is the target in words, e.g. "≥ 1.0".
	Want string
	// Got is the measured value, or "not measured".
	Got string
	// Met is nil when the measure is missing.
	Met *bool
}

type comparison struct {
	issue int
	what  string
	op    string // ">=", "<=", "==", "<"
	want  float64
	// value extracts the measure from a report; ok false when missing.
	value func(r *Report) (float64, bool)
}

func fromRatio(name string) func(*Report) (float64, bool) {
	return func(r *Report) (float64, bool) {
		v := r.Ratios[name]
		if v == nil {
			return 0, false
		}
		return *v, true
	}
}

func fromCheck(name string) func(*Report) (float64, bool) {
	return func(r *Report) (float64, bool) {
		return checkNumber(r.Checks[name])
	}
}

// checkNumber converts a check value (a Go number or a JSON-decoded one)
// to float64.
func checkNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case *float64:
		if n == nil {
			return 0, false
		}
		return *n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

var comparisons = []comparison{
	{3, "hot signups/s at 64 clients vs one-row UPDATE at 32 clients", ">=", 1.0, fromRatio(RatioSignupHotVsHotRow)},
	{3, "hot signups/s at 256 clients vs one-row UPDATE at 256 clients", ">=", 1.5, fromRatio(RatioSignupHot256VsHotRow256)},
	{3, "hot signups/s vs signups spread over 1,000 activities", ">=", 0.8, fromRatio(RatioSignupHotVsSpread)},
	{3, "flash crowd: admitted of 500 seats", "==", FlashCrowdCapacity, fromCheck(CheckFlashAdmitted)},
	{3, "flash crowd: 5xx responses", "==", 0, fromCheck(CheckFlash5xx)},
	{3, "flash crowd: admission transactions that reached PostgreSQL", "<=", 50, fromCheck(CheckFlashAdmissionTx)},
	{3, "seat reads: PostgreSQL transactions with a warm cache", "==", 0, fromCheck(CheckSeatsReadPGQueries)},
	{10, "hot cancellations/s vs hot signups/s at 64 clients", ">=", 0.8, fromRatio(RatioCancelHotVsSignupHot)},
	{4, "hot-note views/s at 64 clients vs one upsert per request", ">=", 5, fromRatio(RatioViewsHotVsNaive)},
	{4, "hot-note views/s at 64 clients vs pgx single-note upsert at 32 clients", ">=", 5, fromRatio(RatioViewsHotVsPGUpsert)},
	{5, "1,000 stream clients: p99 fan-out of a signup (ms)", "<", 1000, fromCheck(CheckSSEP99MS)},
	{5, "1,000 stream clients: instance RSS (MB)", "<", 200, fromCheck(CheckSSERSSMB)},
	{5, "1,000 stream clients: PostgreSQL transactions caused by the streams", "==", 0, fromCheck(CheckSSEStreamPGQueries)},
	{0, "hot signups/s with two webhooks for every event vs without", ">=", 0.8, fromRatio(RatioSignupHotWebhooks)},
	{0, "webhook outbox drained after the load stopped (s)", "<=", 5, fromCheck(CheckWebhookDrainSeconds)},
}

// Targets judges the report against every performance target of issues 3,
// 4 and 5, plus the plan check of the authority COUNT.
func Targets(r *Report) []Target {
	out := make([]Target, 0, len(comparisons)+1)
	for _, c := range comparisons {
		t := Target{Issue: c.issue, What: c.what, Want: opWord(c.op) + " " + trimFloat(c.want), Got: "not measured"}
		if v, ok := c.value(r); ok {
			met := compare(v, c.op, c.want)
			t.Got, t.Met = trimFloat(v), &met
		}
		out = append(out, t)
	}
	plan := Target{Issue: 3, What: "authority COUNT plan on the hot activity after 20 executions", Want: "no Seq Scan, no row filter", Got: "not measured"}
	if p, ok := r.Checks[CheckCountHotPlan].(string); ok && p != "" {
		met := !strings.Contains(p, "Seq Scan") && !strings.Contains(p, "Filter")
		plan.Got, plan.Met = p, &met
	}
	return append(out, plan)
}

func compare(v float64, op string, want float64) bool {
	switch op {
	case ">=":
		return v >= want
	case "<=":
		return v <= want
	case "<":
		return v < want
	default:
		return v == want
	}
}

func opWord(op string) string {
	switch op {
	case ">=":
		return "≥"
	case "<=":
		return "≤"
	case "<":
		return "<"
	default:
		return "="
	}
}

// trimFloat formats v without trailing zeros.
func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}
