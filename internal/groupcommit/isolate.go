package groupcommit

import "context"

// Isolate wraps flush so that one request's data cannot fail the requests
// it was batched with. When a flush fails with an error that blame says is
// the fault of something in the batch (bad data rather than an unavailable
// database), the requests are flushed again in halves, each half on its
// own, splitting on until the request at fault is alone: it gets the error,
// every other request the outcome it would have had in a batch without it.
//
// The batches of several keys are split into halves of keys first, then a
// key's requests into a first and a second half, flushed in that order, so
// that each key's requests are still flushed in the order they were
// submitted. Errors that blame does not claim (the database unreachable, a
// deadline) fail the batch as before: flushing it again would fail again.
// A batch with one request at fault costs about 2·log2(n) more flushes.
//
// flush must leave nothing behind when it fails: it is called again on the
// same requests.
func Isolate[K comparable, Req, Res any](flush FlushFunc[K, Req, Res], blame func(error) bool) FlushFunc[K, Req, Res] {
	iso := isolator[K, Req, Res]{flush: flush, blame: blame}
	return iso.run
}

type isolator[K comparable, Req, Res any] struct {
	flush FlushFunc[K, Req, Res]
	blame func(error) bool
}

// run flushes batches; on a blamed failure it flushes them again in parts.
// It returns an error only when the whole flush failed for a reason that is
// nobody's data, or when the failing part is a single request.
func (iso isolator[K, Req, Res]) run(ctx context.Context, batches []*Batch[K, Req, Res]) error {
	err := iso.flush(ctx, batches)
	if err != nil {
		if !iso.blame(err) || requests(batches) < 2 {
			return err
		}
		for _, b := range batches {
			b.Results, b.Err, b.Errs = nil, nil, nil
		}
		if len(batches) == 1 {
			iso.split(ctx, batches[0])
			return nil
		}
		h := len(batches) / 2
		for _, half := range [][]*Batch[K, Req, Res]{batches[:h], batches[h:]} {
			if err := iso.run(ctx, half); err != nil {
				for _, b := range half {
					b.Results, b.Err, b.Errs = nil, err, nil
				}
			}
		}
		return nil
	}
	// A flush may fail one key's batch alone (PerKey does): that batch is
	// split the same way.
	for _, b := range batches {
		if b.Err != nil && iso.blame(b.Err) && len(b.Reqs) > 1 {
			b.Results, b.Err, b.Errs = nil, nil, nil
			iso.split(ctx, b)
		}
	}
	return nil
}

// split flushes b's requests as two batches of the same key, the first half
// then the second, and gathers their outcomes back into b, request by
// request.
func (iso isolator[K, Req, Res]) split(ctx context.Context, b *Batch[K, Req, Res]) {
	h := len(b.Reqs) / 2
	b.Results = make([]Res, len(b.Reqs))
	b.Errs = make([]error, len(b.Reqs))
	for _, span := range [][2]int{{0, h}, {h, len(b.Reqs)}} {
		part := &Batch[K, Req, Res]{Key: b.Key, Reqs: b.Reqs[span[0]:span[1]]}
		err := iso.run(ctx, []*Batch[K, Req, Res]{part})
		if err == nil {
			err = part.Err
		}
		if err == nil && len(part.Results) != len(part.Reqs) {
			err = errWrongResults
		}
		for j := range part.Reqs {
			switch {
			case err != nil:
				b.Errs[span[0]+j] = err
			case part.Errs != nil && part.Errs[j] != nil:
				b.Errs[span[0]+j] = part.Errs[j]
			default:
				b.Results[span[0]+j] = part.Results[j]
			}
		}
	}
}

func requests[K comparable, Req, Res any](batches []*Batch[K, Req, Res]) int {
	n := 0
	for _, b := range batches {
		n += len(b.Reqs)
	}
	return n
}
