package registration

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/physiciansnet/capacityd/internal/groupcommit"
)

type metrics struct {
	signups          *prometheus.CounterVec
	fullChecksPassed prometheus.Counter
	transactions     *prometheus.CounterVec
	batchSize        prometheus.Histogram
	batchActivities  prometheus.Histogram
	batchSeconds     prometheus.Histogram
	gathers          *prometheus.CounterVec
	events           *prometheus.CounterVec
	expired          prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		signups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_signups_total",
			Help: "Signups by outcome (admitted, waitlisted, full_gate, activity_full, already_registered, idempotency_conflict, replayed, error, ...).",
		}, []string{"outcome"}),
		fullChecksPassed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_full_checks_passed_total",
			Help: "Signups the display gate called full that the authority found room (or a waiting list) for.",
		}),
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_admission_transactions_total",
			Help: "Change transactions (signups, cancellations, status changes, expiries, activity changes) that reached PostgreSQL, by result.",
		}, []string{"result"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "capacityd_admission_batch_size",
			Help:    "Commands applied by one change transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		batchActivities: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "capacityd_admission_batch_activities",
			Help:    "Activities served by one change transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "capacityd_admission_transaction_seconds",
			Help:    "Duration of change transactions.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		gathers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_admission_gathers_total",
			Help: "Gathers of crowded activities before their next change transaction, by how they ended: filled (as many commands as the last transaction took queued) or deadline (ADMISSION_GATHER passed).",
		}, []string{"ended"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_registration_events_total",
			Help: "Registration events recorded by this instance, by type.",
		}, []string{"type"}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_holds_expired_total",
			Help: "awaiting_payment registrations expired by this instance.",
		}),
	}
	for _, e := range groupcommit.GatherEndings {
		m.gathers.WithLabelValues(e)
	}
	if reg != nil {
		reg.MustRegister(m.signups, m.fullChecksPassed, m.transactions, m.batchSize, m.batchActivities,
			m.batchSeconds, m.gathers, m.events, m.expired)
	}
	return m
}

// gatherEnded counts a gather by how it ended (groupcommit.Options.GatherEnded).
func (m *metrics) gatherEnded(ended string) { m.gathers.WithLabelValues(ended).Inc() }

// count counts committed events by type.
func (m *metrics) count(evs []Event) {
	for _, e := range evs {
		m.events.WithLabelValues(string(e.Type)).Inc()
	}
}
