package checkin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

// metrics are the door's Prometheus metrics.
type metrics struct {
	scans     *prometheus.CounterVec
	conflicts *prometheus.CounterVec
	inside    *prometheus.GaugeVec
	// batchSize and batchSeconds describe the transactions of gathered
	// scans; gathers counts the waits before them (see NewService).
	batchSize    prometheus.Histogram
	batchSeconds prometheus.Histogram
	gathers      *prometheus.CounterVec
	// yieldSeconds sums the waits of busy lists for seat changes (see
	// yieldFactor).
	yieldSeconds prometheus.Counter
}

// scanResults are the results a scan is counted under: recorded
// (entered, exited, forced) or refused with its code.
var scanResults = []string{ResultEntered, ResultExited, "forced", capacityd.EInvalidTicket, capacityd.ETicketRevoked,
	capacityd.EWrongList, capacityd.ECheckinClosed, capacityd.EAlreadyCheckedIn, capacityd.ENotInside, capacityd.ERoomFull,
	capacityd.EInvalid, capacityd.ENotFound, capacityd.EForbidden, capacityd.EIdempotencyConflict, "error"}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_checkin_scans_total",
			Help: "Scans at check-in lists by result: entered, exited, forced (an offline upload), or the code of the refusal.",
		}, []string{"result"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_checkin_conflicts_total",
			Help: "Forced (offline) check-ins recorded although they broke a rule, by the rule.",
		}, []string{"rule"}),
		inside: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capacityd_checkin_inside",
			Help: "Seats inside through a check-in list, as of the last scan this instance recorded on it.",
		}, []string{"list"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "capacityd_checkin_batch_size",
			Help:    "Scans of one list decided and recorded by one transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 9),
		}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "capacityd_checkin_transaction_seconds",
			Help:    "Duration of the transactions of gathered scans.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		gathers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_checkin_gathers_total",
			Help: "Waits of a busy list for its devices' next scans before its next transaction, by how they ended: filled or deadline.",
		}, []string{"ended"}),
		yieldSeconds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_checkin_yield_seconds_total",
			Help: "Time busy check-in lists waited between transactions to leave the processor to the instance's seat changes.",
		}),
	}
	for _, e := range groupcommit.GatherEndings {
		m.gathers.WithLabelValues(e)
	}
	for _, r := range scanResults {
		m.scans.WithLabelValues(r)
	}
	for _, r := range []string{capacityd.EAlreadyCheckedIn, capacityd.ETicketRevoked, capacityd.ERoomFull, capacityd.ECheckinClosed,
		capacityd.EWrongList, capacityd.ENotInside} {
		m.conflicts.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.scans, m.conflicts, m.inside, m.batchSize, m.batchSeconds, m.gathers, m.yieldSeconds)
	}
	return m
}

// scanned counts a scan's outcome.
func (m *metrics) scanned(r Redeemed, err error) {
	switch {
	case err != nil:
		code := capacityd.ErrorCode(err)
		for _, known := range scanResults {
			if known == code {
				m.scans.WithLabelValues(code).Inc()
				return
			}
		}
		m.scans.WithLabelValues("error").Inc()
	case r.Replayed:
	case r.CheckIn.Forced:
		m.scans.WithLabelValues("forced").Inc()
		if r.CheckIn.Conflict != nil {
			m.conflicts.WithLabelValues(*r.CheckIn.Conflict).Inc()
		}
		m.inside.WithLabelValues(r.List.ID).Set(float64(r.List.Inside))
	default:
		m.scans.WithLabelValues(r.Result).Inc()
		m.inside.WithLabelValues(r.List.ID).Set(float64(r.List.Inside))
	}
}

// gatherEnded counts a gather by how it ended (groupcommit.Options.GatherEnded).
func (m *metrics) gatherEnded(ended string) { m.gathers.WithLabelValues(ended).Inc() }
