package capacity

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	rebuilds    prometheus.Counter
	redisErrors *prometheus.CounterVec
	drift       *prometheus.GaugeVec
	corrections prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		rebuilds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_seat_cache_rebuilds_total",
			Help: "Display counters rebuilt from the authority after a miss.",
		}),
		redisErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_redis_errors_total",
			Help: "Redis errors of the display tier, by operation; each fell back to the authority.",
		}, []string{"op"}),
		drift: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capacityd_seat_cache_drift",
			Help: "Display taken minus authority taken at the last reconciliation, by activity.",
		}, []string{"activity_id"}),
		corrections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capacityd_seat_cache_corrections_total",
			Help: "Display counters corrected by the reconciler.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.rebuilds, m.redisErrors, m.drift, m.corrections)
	}
	return m
}
