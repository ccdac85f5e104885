package onsale

import "context"

// LineStats returns the state of the activity's line for an organiser's
// view (its length, what it admitted, the tokens out, whether it sold
// out), and whether the activity has a line yet. While this instance
// advances the line (it does at every tick once the line is joined or
// polled here), the state comes from its memory, as polls' answers do;
// otherwise it is read from the authority (one statement), and what the
// instance remembers is left as it is.
func (q *Queue) LineStats(ctx context.Context, activityID string) (Line, bool, error) {
	q.mu.Lock()
	line, known := q.lines[activityID]
	hot := q.hot[activityID]
	q.mu.Unlock()
	if known && hot {
		return line, true, nil
	}
	return q.auth.QueueLine(ctx, activityID)
}
