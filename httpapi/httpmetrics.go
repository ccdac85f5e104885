package httpapi

import (
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// maxRequestSeries bounds the series requestMetrics remembers; beyond it
// a request's series are looked up by their labels every time, as before
// any was remembered.
const maxRequestSeries = 1024

// requestMetrics are the HTTP metrics: requests by route, method and
// status, and their latency by route and method. It remembers the series
// of each route, method and status it has seen, so that a request does
// not pay for the label lookup (hashing, validation and the status text)
// that names a series it has already counted.
type requestMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec

	mu     sync.RWMutex
	series map[requestKey]requestSeries
}

// requestKey names the series of one route, method and status.
type requestKey struct {
	route, method string
	status        int
}

// requestSeries are the two series a request of one requestKey updates.
type requestSeries struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

func newRequestMetrics(reg prometheus.Registerer) *requestMetrics {
	m := &requestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capacityd_http_requests_total",
			Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "capacityd_http_request_duration_seconds",
			Help:    "HTTP request latency by route and method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route", "method"}),
		series: map[requestKey]requestSeries{},
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// of returns the series of k, remembering them while there is room.
func (m *requestMetrics) of(k requestKey) requestSeries {
	m.mu.RLock()
	s, ok := m.series[k]
	m.mu.RUnlock()
	if ok {
		return s
	}
	s = requestSeries{
		count:   m.requests.WithLabelValues(k.route, k.method, strconv.Itoa(k.status)),
		latency: m.latency.WithLabelValues(k.route, k.method),
	}
	m.mu.Lock()
	if len(m.series) < maxRequestSeries {
		m.series[k] = s
	}
	m.mu.Unlock()
	return s
}

// metricsMiddleware counts requests and observes their latency by route
// and status. It handles the error itself so the status is known.
func (s *Server) metricsMiddleware(reg prometheus.Registerer) echo.MiddlewareFunc {
	m := newRequestMetrics(reg)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			if err := next(c); err != nil {
				c.Error(err)
			}
			rs := m.of(requestKey{route: routeOf(c), method: c.Request().Method, status: c.Response().Status})
			rs.count.Inc()
			rs.latency.Observe(time.Since(start).Seconds())
			return nil
		}
	}
}
