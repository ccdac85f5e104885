package note

import "github.com/prometheus/client_golang/prometheus"

// metrics are the Service's Prometheus metrics:
// capacityd_note_increments_total{kind,result}, capacityd_note_upserts_total{result}
// and capacityd_note_batch_size.
type metrics struct {
	increments *prometheus.CounterVec
	upserts    *prometheus.CounterVec
	batchSize  prometheus.Histogram

	// Resolved children, so the hot path does no label lookups.
	committed map[Kind]prometheus.Counter
	failed    map[Kind]prometheus.Counter
	unknown   map[Kind]prometheus.Counter
	upsertOK  prometheus.Counter
	upsertErr prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		increments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_note_increments_total",
			Help: "Note increments by kind (view, water) and result (committed, failed, unknown: a note not registered).",
		}, []string{"kind", "result"}),
		upserts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_note_upserts_total",
			Help: "Note counter upserts executed, by result (ok, error).",
		}, []string{"result"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "capacityd_note_batch_size",
			Help:    "Increments combined into one note counter upsert.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
	}
	m.committed = map[Kind]prometheus.Counter{
		View:  m.increments.WithLabelValues("view", "committed"),
		Water: m.increments.WithLabelValues("water", "committed"),
	}
	m.failed = map[Kind]prometheus.Counter{
		View:  m.increments.WithLabelValues("view", "failed"),
		Water: m.increments.WithLabelValues("water", "failed"),
	}
	m.unknown = map[Kind]prometheus.Counter{
		View:  m.increments.WithLabelValues("view", "unknown"),
		Water: m.increments.WithLabelValues("water", "unknown"),
	}
	m.upsertOK = m.upserts.WithLabelValues("ok")
	m.upsertErr = m.upserts.WithLabelValues("error")
	if reg != nil {
		reg.MustRegister(m.increments, m.upserts, m.batchSize)
	}
	return m
}
