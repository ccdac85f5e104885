package loadtest

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies records operation latencies in an HdrHistogram, in
// microseconds from 1 µs to 2 minutes with 3 significant digits. It is not
// safe for concurrent use: give each worker its own and Merge them.
type Latencies struct {
	h *hdrhistogram.Histogram
}

// NewLatencies returns an empty recorder.
func NewLatencies() *Latencies {
	return &Latencies{h: hdrhistogram.New(1, int64(2*time.Minute/time.Microsecond), 3)}
}

// Record adds one latency; values beyond the range are clamped.
func (l *Latencies) Record(d time.Duration) {
	us := d.Microseconds()
	if us < 1 {
		us = 1
	}
	if max := l.h.HighestTrackableValue(); us > max {
		us = max
	}
	_ = l.h.RecordValue(us)
}

// Merge adds every value of o.
func (l *Latencies) Merge(o *Latencies) { l.h.Merge(o.h) }

// Count returns how many latencies were recorded.
func (l *Latencies) Count() int64 { return l.h.TotalCount() }

// QuantileMS returns the q-th percentile (0–100) in milliseconds.
func (l *Latencies) QuantileMS(q float64) float64 {
	if l.h.TotalCount() == 0 {
		return 0
	}
	return round(float64(l.h.ValueAtQuantile(q))/1000, 3)
}

// MaxMS returns the largest latency in milliseconds.
func (l *Latencies) MaxMS() float64 {
	if l.h.TotalCount() == 0 {
		return 0
	}
	return round(float64(l.h.Max())/1000, 3)
}
