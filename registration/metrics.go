package registration

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	signups      *prometheus.CounterVec
	admissionTx  *prometheus.CounterVec
	batchSize    prometheus.Histogram
	batchSeconds prometheus.Histogram
	expired      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		signups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_signups_total",
			Help: "Signups by outcome (admitted, full_gate, activity_full, already_registered, idempotency_conflict, replayed, error).",
		}, []string{"outcome"}),
		admissionTx: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_admission_transactions_total",
			Help: "Admission transactions that reached PostgreSQL, by result.",
		}, []string{"result"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "capacityd_admission_batch_size",
			Help:    "Signups taken by one admission transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "capacityd_admission_transaction_seconds",
			Help:    "Duration of admission transactions.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_holds_expired_total",
			Help: "awaiting_payment registrations expired by this instance.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.signups, m.admissionTx, m.batchSize, m.batchSeconds, m.expired)
	}
	return m
}
