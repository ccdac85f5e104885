package histcheck

import (
	"net/http"
	"sort"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// logical is one operation as the checker sees it: the attempts that
// share a logical id folded into one call, from the first attempt's call
// to the answer that settled it.
type logical struct {
	kind     history.Kind
	input    history.Input
	client   int
	instance string
	attempts int
	call     int64
	ret      int64
	out      history.Output
	// unknown: no attempt settled it and some attempt may have taken
	// effect. Its return is open-ended.
	unknown bool
}

// settles reports whether an attempt's answer is the operation's outcome.
// 503 unavailable means nothing was written; a refused connection never
// reached the service; both leave the operation to its other attempts.
func settles(op history.Op) bool {
	return op.Result == history.Answered && op.Output.Status < 500
}

// mayHaveActed reports whether an attempt that did not settle its
// operation may still have taken effect.
func mayHaveActed(op history.Op) bool {
	switch op.Result {
	case history.Unknown:
		return true
	case history.Answered:
		// Any 5xx but 503 promises nothing.
		return op.Output.Status >= 500 && op.Output.Status != http.StatusServiceUnavailable
	}
	return false
}

// fold folds the attempts of h into logical operations, in order of their
// calls. Operations that certainly had no effect and observed nothing are
// left out, and so are reads without an answer.
func fold(h history.History) []logical {
	groups := map[int][]history.Op{}
	var order []int
	for _, op := range h.Ops {
		if _, ok := groups[op.Logical]; !ok {
			order = append(order, op.Logical)
		}
		groups[op.Logical] = append(groups[op.Logical], op)
	}
	var out []logical
	for _, id := range order {
		atts := groups[id]
		sort.Slice(atts, func(i, j int) bool { return atts[i].Call < atts[j].Call })
		first := atts[0]
		if first.Input.Key == "" {
			continue // an activity whose creation was never answered: no operation names it
		}
		l := logical{kind: first.Kind, input: first.Input, client: first.Client, instance: first.Instance,
			attempts: len(atts), call: first.Call}
		settled, maybe := -1, false
		for i, a := range atts {
			if settles(a) {
				settled = i
			} else if mayHaveActed(a) {
				maybe = true
			}
		}
		if settled >= 0 && maybe && goneByItsOwnHand(l.kind, atts[settled].Output) {
			settled = -1
		}
		switch {
		case settled >= 0:
			a := atts[settled]
			l.ret, l.out, l.instance = a.Return, a.Output, a.Instance
		case maybe && !isRead(l.kind):
			l.unknown = true
		default:
			continue
		}
		out = append(out, l)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].call < out[j].call })
	return out
}

// goneByItsOwnHand reports whether an answer may be what an earlier
// attempt of the same operation, which may have acted, left: a block
// deletion retried finds its block gone.
func goneByItsOwnHand(k history.Kind, o history.Output) bool {
	return k == history.DeleteBlock && o.Status == http.StatusNotFound
}

func isRead(k history.Kind) bool {
	return k == history.ReadActivity || k == history.ReadSeats || k == history.NoteStats || k == history.ReadPool || k == history.ReadQueue
}

// lastReturn is a time after every recorded call and return: the return
// of operations without an answer.
func lastReturn(h history.History) int64 {
	var t int64
	for _, op := range h.Ops {
		t = max(t, op.Call, op.Return)
	}
	return t + 1
}
