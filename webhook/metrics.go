package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	attempts *prometheus.CounterVec
	latency  prometheus.Histogram
	inFlight prometheus.Gauge
	backlog  prometheus.Gauge
	oldest   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_webhook_deliveries_total",
			Help: "Webhook delivery attempts made by this instance, by outcome: delivered (2xx), retried (tried again later), failed (retries over after 24 h), disabled (410 Gone disabled the webhook).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "capacityd_webhook_attempt_seconds",
			Help:    "Duration of webhook delivery attempts, answered or not.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capacityd_webhook_sends_in_flight",
			Help: "Webhook delivery attempts this instance has in flight.",
		}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capacityd_webhook_backlog",
			Help: "Pending webhook deliveries of enabled webhooks (all instances), as of the last refresh.",
		}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capacityd_webhook_oldest_pending_seconds",
			Help: "Age of the oldest pending webhook delivery's event (0: none pending), as of the last refresh.",
		}),
	}
	for _, o := range []Outcome{OutcomeDelivered, OutcomeRetry, OutcomeFailed, OutcomeGone} {
		m.attempts.WithLabelValues(string(o))
	}
	if reg != nil {
		reg.MustRegister(m.attempts, m.latency, m.inFlight, m.backlog, m.oldest)
	}
	return m
}

func (m *metrics) observe(a Attempt) {
	m.attempts.WithLabelValues(string(a.Outcome)).Inc()
	m.latency.Observe(a.Duration.Seconds())
}

func (m *metrics) setBacklog(b Backlog, now time.Time) {
	m.backlog.Set(float64(b.Pending))
	age := 0.0
	if !b.Oldest.IsZero() {
		age = max(0, now.Sub(b.Oldest).Seconds())
	}
	m.oldest.Set(age)
}
