package httpapi

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/physiciansnet/capacityd"
)

// RateLimit is a token bucket per client: PerSecond requests a second on
// average, with bursts of up to Burst. The zero value is off.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// Off reports whether the limit is disabled.
func (l RateLimit) Off() bool { return l.PerSecond <= 0 }

// String formats the limit as ParseRateLimit reads it.
func (l RateLimit) String() string {
	if l.Off() {
		return "0"
	}
	return strconv.FormatFloat(l.PerSecond, 'f', -1, 64) + ":" + strconv.Itoa(l.Burst)
}

// ParseRateLimit reads "RATE" or "RATE:BURST": RATE requests per second per
// client (a decimal, 0 for off), BURST the most requests at once (default
// twice RATE, at least 1).
func ParseRateLimit(s string) (RateLimit, error) {
	rs, bs, hasBurst := strings.Cut(strings.TrimSpace(s), ":")
	r, err := strconv.ParseFloat(rs, 64)
	if err != nil || r < 0 || math.IsInf(r, 0) || math.IsNaN(r) || r > 1e6 {
		return RateLimit{}, fmt.Errorf("want RATE or RATE:BURST with RATE requests per second from 0 (off) to 1e6, got %q", s)
	}
	if r == 0 {
		return RateLimit{}, nil
	}
	l := RateLimit{PerSecond: r, Burst: max(1, int(math.Ceil(2*r)))}
	if hasBurst {
		b, err := strconv.Atoi(bs)
		if err != nil || b < 1 || b > 1e6 {
			return RateLimit{}, fmt.Errorf("want BURST an integer from 1 to 1000000, got %q", bs)
		}
		l.Burst = b
	}
	return l, nil
}

// maxLimiterEntries bounds the clients one limiter tracks. Past it, new
// clients share one bucket until idle entries are evicted.
const maxLimiterEntries = 50_000

// overflowKey names the bucket shared by clients that find the limiter
// full.
const overflowKey = "\x00overflow"

// limiter holds one token bucket per client key and evicts the buckets of
// idle clients, so that its memory stays bounded however many clients come
// and go. Evicting a bucket idle for longer than it takes to refill is
// exact: it would be full again anyway.
type limiter struct {
	limit   rate.Limit
	burst   int
	idle    time.Duration
	max     int
	now     func() time.Time
	refused prometheus.Counter

	mu        sync.Mutex
	entries   map[string]*limiterEntry
	lastSweep time.Time
}

type limiterEntry struct {
	bucket *rate.Limiter
	last   time.Time
}

func newLimiter(l RateLimit, now func() time.Time, refused prometheus.Counter) *limiter {
	refill := time.Duration(float64(l.Burst) / l.PerSecond * float64(time.Second))
	return &limiter{
		limit: rate.Limit(l.PerSecond), burst: l.Burst, idle: max(refill, 10*time.Second),
		max: maxLimiterEntries, now: now, refused: refused,
		entries: make(map[string]*limiterEntry), lastSweep: now(),
	}
}

// allow takes a token for key. When none is left it returns false and how
// long until one is.
func (l *limiter) allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= l.idle || (len(l.entries) >= l.max && now.Sub(l.lastSweep) >= time.Second) {
		l.sweep(now)
	}
	e, ok := l.entries[key]
	if !ok {
		if len(l.entries) >= l.max {
			key = overflowKey
			e = l.entries[key]
		}
		if e == nil {
			e = &limiterEntry{bucket: rate.NewLimiter(l.limit, l.burst)}
			l.entries[key] = e
		}
	}
	e.last = now
	r := e.bucket.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		l.refused.Inc()
		return false, d
	}
	return true, 0
}

// sweep drops the entries idle for longer than it takes to refill.
func (l *limiter) sweep(now time.Time) {
	for k, e := range l.entries {
		if now.Sub(e.last) >= l.idle {
			delete(l.entries, k)
		}
	}
	l.lastSweep = now
}

// size returns how many clients the limiter tracks.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// rateLimits are the server's limiters; a nil limiter is off.
type rateLimits struct {
	publicWrites *limiter
	signups      *limiter
	publicReads  *limiter
}

func newRateLimits(public, signups, reads RateLimit, reg prometheus.Registerer) *rateLimits {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capacityd_rate_limited_total",
		Help: "Requests refused with 429 by limit.",
	}, []string{"limit"})
	reg.MustRegister(refused)
	rl := &rateLimits{}
	add := func(name string, l RateLimit) *limiter {
		if l.Off() {
			return nil
		}
		lim := newLimiter(l, time.Now, refused.WithLabelValues(name))
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "capacityd_rate_limit_clients",
			Help:        "Clients a rate limiter tracks.",
			ConstLabels: prometheus.Labels{"limit": name},
		}, func() float64 { return float64(lim.size()) }))
		return lim
	}
	rl.publicWrites = add("public_writes", public)
	rl.signups = add("signups", signups)
	rl.publicReads = add("public_reads", reads)
	return rl
}

// rateLimited is the 429 for a client that must wait d.
func rateLimited(d time.Duration, what string) error {
	return &capacityd.Error{
		Code: capacityd.ERateLimited, Message: "too many " + what + "; retry later",
		RetryAfter: max(time.Second, time.Duration(math.Ceil(d.Seconds()))*time.Second),
	}
}

// clientKey returns the key of the client for per-address limits: its
// address as echo's IPExtractor finds it (the connection's peer, or the
// forwarded address when the peer is a trusted proxy; see
// clientAddrExtractor), an IPv6 address reduced to its /64.
func clientKey(c echo.Context) string {
	addr := c.RealIP()
	ip := net.ParseIP(addr)
	if ip == nil {
		return addr
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String()
	}
	return ip.String()
}

// limitPublicWrites is route middleware limiting the public writes (note
// views and waters, demo signups) per client IP.
func (s *Server) limitPublicWrites(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.limits == nil || s.limits.publicWrites == nil {
			return next(c)
		}
		if ok, d := s.limits.publicWrites.allow(clientKey(c)); !ok {
			return rateLimited(d, "note writes from this address")
		}
		return next(c)
	}
}

// limitSignups is route middleware, after authenticate, limiting signups
// per user.
func (s *Server) limitSignups(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.limits == nil || s.limits.signups == nil {
			return next(c)
		}
		if ok, d := s.limits.signups.allow(callerOf(c).UserID); !ok {
			return rateLimited(d, "signups by this user")
		}
		return next(c)
	}
}
