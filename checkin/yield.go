package checkin

import "time"

// SeatChanges tells whether seat changes (signups, cancellations, …) ran
// on this instance lately: a busy door yields the processor to them.
type SeatChanges interface {
	ChangedWithin(d time.Duration) bool
}

// A door's scans and the instance's seat changes share its processor (and
// PostgreSQL's). A rush at a door of many devices takes as much of it as
// it gets: each device scans again as soon as it is answered. Seat changes
// come first: while a transaction of them began within yieldWindow, a
// list's scans are answered as soon as their transaction commits, and the
// list's next transaction waits yieldFactor times as long as that one took
// (at most yieldMax), its devices' scans queueing meanwhile: its
// transactions then take at most 1/(yieldFactor+1) of the time. A door
// alone is never held back, and a scan at a door of people (a scan a
// second or two at each device) waits at most yieldMax, which nobody in
// the line notices.
const (
	yieldFactor = 24
	yieldMax    = 100 * time.Millisecond
	yieldWindow = 100 * time.Millisecond
)

// rest is how long a list waits after a transaction that took took before
// its next one (groupcommit.Options.Rest).
func (s *Service) rest(took time.Duration) time.Duration {
	if s.cfg.SeatChanges == nil || !s.cfg.SeatChanges.ChangedWithin(yieldWindow) {
		return 0
	}
	d := min(took*yieldFactor, yieldMax)
	s.metrics.yieldSeconds.Add(d.Seconds())
	return d
}
