package capacity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

// gateBatch caps the activity gates one Redis pipeline carries, and
// gateFlushTimeout bounds one pipeline, its retries included: a Redis that
// does not answer by then is treated as down (the signups fall back to the
// authority), as a single command's read timeout made it before.
const (
	gateBatch        = 256
	gateFlushTimeout = time.Second
)

// errGateTimeout is the error of the gate runs of a pipeline that got no
// answer within gateFlushTimeout.
var errGateTimeout = fmt.Errorf("capacity: the gate's pipeline got no answer from Redis within %s", gateFlushTimeout)

// gateReply is a gate script's reply, or the error of its command.
type gateReply struct {
	v   []any
	err error
}

// newGates returns the group that sends the gate runs that come at once
// in one Redis pipeline: one write and one read for a crowd of signups
// instead of one of each per signup, with at most one pipeline in flight
// (those that come meanwhile go in the next). Each run is the same script
// on its own keys as alone, so the rule and its atomicity do not move.
func (c *Counter) newGates() *groupcommit.Group[struct{}, script, gateReply] {
	return groupcommit.New(groupcommit.PerKey(c.runGates), groupcommit.Options{MaxBatch: gateBatch, FlushTimeout: gateFlushTimeout})
}

// gate runs a signup's gate script (reserveScript, or
// pooledReserveScript for an activity and its pools together) in the next
// pipeline. A signup whose context ends before its run is sent is
// withdrawn: nothing was held.
func (c *Counter) gate(ctx context.Context, run script) ([]any, error) {
	r, err := c.gates.Submit(ctx, struct{}{}, run)
	if errors.Is(err, groupcommit.ErrWithdrawn) {
		err = errors.Join(ctx.Err(), err)
	}
	if err != nil {
		return nil, err
	}
	return r.v, r.err
}

// runGates runs one pipeline of gate scripts and returns each one's reply.
// ctx is the pipeline's own (gateFlushTimeout), never a signup's: a run
// that it cut short got no answer from Redis, which is a Redis error
// (errGateTimeout), not a request that ended.
func (c *Counter) runGates(ctx context.Context, _ struct{}, runs []script) ([]gateReply, error) {
	cmds, _ := runScripts(ctx, c.rdb, runs)
	out := make([]gateReply, len(cmds))
	for i, cmd := range cmds {
		out[i].v, out[i].err = cmd.Slice()
		if errors.Is(out[i].err, context.DeadlineExceeded) || errors.Is(out[i].err, context.Canceled) {
			out[i].err = errGateTimeout
		}
	}
	return out, nil
}
