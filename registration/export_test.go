package registration

import (
	"context"

	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

// outcomes unpacks flushed batches: each request's result, or its error.
func outcomes[K comparable, Req, Res any](batches []*groupcommit.Batch[K, Req, Res], err error) ([][]Res, [][]error) {
	res := make([][]Res, len(batches))
	errs := make([][]error, len(batches))
	for i, b := range batches {
		res[i] = make([]Res, len(b.Reqs))
		errs[i] = make([]error, len(b.Reqs))
		for j := range b.Reqs {
			switch {
			case err != nil:
				errs[i][j] = err
			case b.Err != nil:
				errs[i][j] = b.Err
			case b.Errs != nil && b.Errs[j] != nil:
				errs[i][j] = b.Errs[j]
			default:
				res[i][j] = b.Results[j]
			}
		}
	}
	return res, errs
}

// ApplyBatches runs one flush of the change queue, as the queue runs it
// for commands that queued together, and returns each command's outcome
// or error.
func (s *Service) ApplyBatches(ctx context.Context, in []CommandBatch) ([][]Outcome, [][]error) {
	batches := make([]*groupcommit.Batch[string, Command, Outcome], len(in))
	for i, b := range in {
		batches[i] = &groupcommit.Batch[string, Command, Outcome]{Key: b.ActivityID, Reqs: b.Commands}
	}
	return outcomes(batches, s.apply(ctx, batches))
}

// FullVerdict is one user's answer of a full check.
type FullVerdict struct {
	Counts Counts
	Holder string
}

// CheckFullBatches runs one flush of the full checks.
func (s *Service) CheckFullBatches(ctx context.Context, in []FullCheck) ([][]FullVerdict, [][]error) {
	batches := make([]*groupcommit.Batch[string, string, fullVerdict], len(in))
	for i, c := range in {
		batches[i] = &groupcommit.Batch[string, string, fullVerdict]{Key: c.ActivityID, Reqs: c.UserIDs}
	}
	res, errs := outcomes(batches, s.checkFull(ctx, batches))
	out := make([][]FullVerdict, len(res))
	for i, r := range res {
		for _, v := range r {
			out[i] = append(out[i], FullVerdict{Counts: v.counts, Holder: v.holder})
		}
	}
	return out, errs
}

// LookupBatch runs one flush of the registration lookups.
func (s *Service) LookupBatch(ctx context.Context, ids []string) ([]*Registration, []error) {
	b := &groupcommit.Batch[struct{}, string, lookup]{Reqs: ids}
	batches := []*groupcommit.Batch[struct{}, string, lookup]{b}
	res, errs := outcomes(batches, s.lookupBatches(ctx, batches))
	out := make([]*Registration, len(ids))
	for j, l := range res[0] {
		if l.found {
			out[j] = &l.reg
		}
	}
	return out, errs[0]
}
