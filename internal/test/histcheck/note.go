package histcheck

import (
	"fmt"
	"net/http"

	"github.com/anishathalye/porcupine"

	"github.com/physiciansnet/capacityd/internal/test/history"
)

// The note model: a note's view and water counters. An increment's answer
// carries the counters right after it, its own increment included; a
// stats read carries them as they are.

type noteState struct{ views, waters int64 }

type noteInput struct{ op history.Op }

type noteOutput struct {
	out     history.Output
	unknown bool
}

func stepNote(st, in, out any) (bool, any) {
	s := st.(noteState)
	op := in.(noteInput).op
	o := out.(noteOutput)
	n := s
	switch op.Kind {
	case history.NoteView:
		n.views++
	case history.NoteWater:
		n.waters++
	case history.NoteStats:
	default:
		return false, s
	}
	if o.unknown {
		return true, n
	}
	return o.out.Status == http.StatusOK && o.out.Views == n.views && o.out.Waters == n.waters, n
}

func noteModel() porcupine.Model {
	return porcupine.Model{
		Partition: partitionByKey,
		Init:      func() any { return noteState{} },
		Step:      stepNote,
		Hash:      func(s any) uint64 { n := s.(noteState); return uint64(n.views)<<32 ^ uint64(n.waters) },
		DescribeOperation: func(in, out any) string {
			op := in.(noteInput).op
			o := out.(noteOutput)
			return fmt.Sprintf("%s → %s", op.Kind, describeOutput(op.Kind, o.out, o.unknown))
		},
		DescribeState: func(s any) string {
			n := s.(noteState)
			return fmt.Sprintf("views %d, waters %d", n.views, n.waters)
		},
		DescribeOperationMetadata: func(m any) string {
			if m == nil {
				return ""
			}
			return fmt.Sprint(m)
		},
	}
}
