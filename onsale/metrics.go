package onsale

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the admission queues' measures, as this instance sees them.
type Metrics struct {
	waiting   prometheus.Gauge
	tokensOut prometheus.Gauge
	admitted  prometheus.Counter
	lapsed    prometheus.Counter
	expired   prometheus.Counter
}

// NewMetrics registers the queue metrics with reg (none when nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capacityd_queue_waiting",
			Help: "Places waiting in the admission queues this instance advanced last, summed over the queues.",
		}),
		tokensOut: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capacityd_queue_tokens_out",
			Help: "Admission tokens out (unused, unexpired) in the queues this instance advanced last, summed.",
		}),
		admitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_queue_admitted_total",
			Help: "Places this instance admitted from admission queues.",
		}),
		lapsed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_queue_lapsed_total",
			Help: "Waiting places this instance found absent and expired.",
		}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_queue_tokens_expired_total",
			Help: "Admission tokens this instance found expired unused.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.waiting, m.tokensOut, m.admitted, m.lapsed, m.expired)
	}
	return m
}

// observe counts what an advance did.
func (m *Metrics) observe(a Advance) {
	if m == nil || !a.Locked {
		return
	}
	m.admitted.Add(float64(a.Admitted))
	m.lapsed.Add(float64(a.Lapsed))
	m.expired.Add(float64(a.TokensExpired))
}

// setTotals sets the gauges from the lines this instance knows.
func (m *Metrics) setTotals(lines map[string]Line) {
	if m == nil {
		return
	}
	var waiting, out int64
	for _, l := range lines {
		waiting += l.Waiting
		out += l.TokensOut
	}
	m.waiting.Set(float64(waiting))
	m.tokensOut.Set(float64(out))
}
