package onsale

import (
	"context"

	"github.com/physiciansnet/capacityd/registration"
)

// Committed implements registration.Observer: a signup committed on this
// instance (a registration created or waitlisted) used its user's token,
// so the user's place in the activity's line, as this instance remembers
// it, is forgotten and its next poll reads it (used) from the authority.
// Activities whose lines this instance does not know are skipped.
func (q *Queue) Committed(_ context.Context, commits []registration.Commit) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, c := range commits {
		if _, known := q.lines[c.ActivityID]; !known || c.Failed {
			continue
		}
		for _, e := range c.Events {
			if e.Type == registration.EventCreated || e.Type == registration.EventWaitlisted {
				delete(q.places, placeKey{c.ActivityID, e.UserID})
			}
		}
	}
}
