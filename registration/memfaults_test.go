package registration

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/physiciansnet/capacityd"
)

// MemOp names a MemStore method, for fault injection and call counts.
type MemOp string

// The MemStore's methods.
const (
	MemCreateActivity      MemOp = "CreateActivity"
	MemGetActivity         MemOp = "GetActivity"
	MemListActivities      MemOp = "ListActivities"
	MemApply               MemOp = "Apply"
	MemCheckFull           MemOp = "CheckFull"
	MemClaimDueHolds       MemOp = "ClaimDueHolds"
	MemFindOutcome         MemOp = "FindOutcome"
	MemPurgeOutcomes       MemOp = "PurgeOutcomes"
	MemGetRegistrations    MemOp = "GetRegistrations"
	MemListRegistrations   MemOp = "ListRegistrations"
	MemUserRegistrations   MemOp = "UserRegistrations"
	MemExportRegistrations MemOp = "ExportRegistrations"
	MemRegistrationEvents  MemOp = "RegistrationEvents"
	MemActivityEvents      MemOp = "ActivityEvents"
)

// MemBlock holds one call of a MemStore method until it is released.
type MemBlock struct {
	entered, released      chan struct{}
	enterOnce, releaseOnce sync.Once
}

func newMemBlock() *MemBlock {
	return &MemBlock{entered: make(chan struct{}), released: make(chan struct{})}
}

// Entered is closed once the call has begun to wait (after the call was
// recorded, before it reads anything).
func (b *MemBlock) Entered() <-chan struct{} { return b.entered }

// Release lets the call go on. It may be called more than once.
func (b *MemBlock) Release() { b.releaseOnce.Do(func() { close(b.released) }) }

// memFault is one injected fault: a block, an error, or a block then an
// error.
type memFault struct {
	block *MemBlock
	err   error
}

// memFaults are a MemStore's injected faults and its record of calls.
type memFaults struct {
	mu      sync.Mutex
	next    map[MemOp][]memFault
	onApply func(batches []CommandBatch) error
	blocks  []*MemBlock
	calls   map[MemOp]int
	applies [][]CommandBatch
	checks  [][]FullCheck
}

// FailNext makes the next call of op fail with err, reading and writing
// nothing. Faults of one op are used in the order they were injected.
func (m *MemStore) FailNext(op MemOp, err error) {
	m.faults.add(op, memFault{err: err})
}

// BlockNext makes the next call of op wait until the block is released:
// it then goes on as usual. A call whose context ends while it waits fails
// unavailable, as a database call does.
func (m *MemStore) BlockNext(op MemOp) *MemBlock {
	b := newMemBlock()
	m.faults.add(op, memFault{block: b})
	return b
}

// OnApply sets a hook that every Apply calls with its batches, after the
// faults of FailNext and BlockNext and before it reads anything: an error
// fails the Apply whole, nothing written (as a failed transaction). nil
// removes it.
func (m *MemStore) OnApply(f func(batches []CommandBatch) error) {
	m.faults.mu.Lock()
	defer m.faults.mu.Unlock()
	m.faults.onApply = f
}

// ReleaseAll releases every block, so that nothing waits on a test that
// ends early.
func (m *MemStore) ReleaseAll() {
	m.faults.mu.Lock()
	blocks := slices.Clone(m.faults.blocks)
	m.faults.mu.Unlock()
	for _, b := range blocks {
		b.Release()
	}
}

// Calls returns how many times op was called.
func (m *MemStore) Calls(op MemOp) int {
	m.faults.mu.Lock()
	defer m.faults.mu.Unlock()
	return m.faults.calls[op]
}

// ApplyCalls returns the batches of each Apply call so far, in call order
// (failed calls too).
func (m *MemStore) ApplyCalls() [][]CommandBatch {
	m.faults.mu.Lock()
	defer m.faults.mu.Unlock()
	return slices.Clone(m.faults.applies)
}

// CheckFullCalls returns the checks of each CheckFull call so far, in call
// order.
func (m *MemStore) CheckFullCalls() [][]FullCheck {
	m.faults.mu.Lock()
	defer m.faults.mu.Unlock()
	return slices.Clone(m.faults.checks)
}

func (f *memFaults) add(op MemOp, fault memFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next == nil {
		f.next = make(map[MemOp][]memFault)
	}
	f.next[op] = append(f.next[op], fault)
	if fault.block != nil {
		f.blocks = append(f.blocks, fault.block)
	}
}

// enter records a call of op (with its argument, for Apply and CheckFull)
// and runs the faults injected for it. It never asks ctx for Done unless
// a block was injected: tests tell from a context's Done when a request
// waits in a queue of the Service.
func (f *memFaults) enter(ctx context.Context, op MemOp, arg any) error {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = make(map[MemOp]int)
	}
	f.calls[op]++
	switch a := arg.(type) {
	case []CommandBatch:
		c := make([]CommandBatch, len(a))
		for i, b := range a {
			c[i] = CommandBatch{ActivityID: b.ActivityID, Commands: slices.Clone(b.Commands)}
		}
		f.applies = append(f.applies, c)
	case []FullCheck:
		c := make([]FullCheck, len(a))
		for i, ch := range a {
			c[i] = FullCheck{ActivityID: ch.ActivityID, UserIDs: slices.Clone(ch.UserIDs)}
		}
		f.checks = append(f.checks, c)
	}
	var fault memFault
	if q := f.next[op]; len(q) > 0 {
		fault, f.next[op] = q[0], q[1:]
	}
	hook := f.onApply
	f.mu.Unlock()

	if b := fault.block; b != nil {
		b.enterOnce.Do(func() { close(b.entered) })
		select {
		case <-b.released:
		case <-ctx.Done():
			return capacityd.Unavailable(context.Cause(ctx), "the database did not answer in time")
		}
	}
	if fault.err != nil {
		return fault.err
	}
	if batches, ok := arg.([]CommandBatch); ok && hook != nil {
		if err := hook(batches); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return capacityd.Unavailable(fmt.Errorf("%s: %w", op, err), "the database is unavailable")
	}
	return nil
}
