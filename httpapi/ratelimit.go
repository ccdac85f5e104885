package httpapi

import (
	"context"
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
	"github.com/physiciansnet/capacityd/internal/lru"
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

// maxLimiterEntries bounds the clients one limiter tracks. Past it, the
// least recently seen client is forgotten to make room for a new one.
const maxLimiterEntries = 50_000

// limiter holds one token bucket per client key, at most max of them, and
// forgets the least recently seen client first: when the table is full, a
// new client evicts it (so a flood of fresh, perhaps spoofed, addresses
// costs every other new client nothing: each still gets its own bucket),
// and a client idle for longer than it takes to refill is dropped anyway.
// Dropping an idle bucket is exact: it would be full again. Evicting a
// busier one hands its client a full bucket when it comes back, one burst
// more than its due; it takes a table's worth of newer clients in between,
// which is more than any one address can send under the limit itself.
type limiter struct {
	limit   rate.Limit
	burst   int
	idle    time.Duration
	now     func() time.Time
	refused prometheus.Counter

	mu      sync.Mutex
	entries *lru.Cache[string, *limiterEntry]
}

type limiterEntry struct {
	bucket *rate.Limiter
	last   time.Time
}

func newLimiter(l RateLimit, now func() time.Time, refused prometheus.Counter) *limiter {
	return newLimiterOf(l, maxLimiterEntries, now, refused)
}

// newLimiterOf is newLimiter tracking at most maxEntries clients.
func newLimiterOf(l RateLimit, maxEntries int, now func() time.Time, refused prometheus.Counter) *limiter {
	refill := time.Duration(float64(l.Burst) / l.PerSecond * float64(time.Second))
	return &limiter{
		limit: rate.Limit(l.PerSecond), burst: l.Burst, idle: max(refill, 10*time.Second),
		now: now, refused: refused, entries: lru.New[string, *limiterEntry](maxEntries),
	}
}

// allow takes a token for key. When none is left it returns false and how
// long until one is.
func (l *limiter) allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	// Entries are in order of last use: the idle ones are at the back.
	l.entries.DropOldestWhile(func(_ string, e *limiterEntry) bool { return now.Sub(e.last) >= l.idle })
	e, ok := l.entries.Get(key)
	if !ok {
		e = &limiterEntry{bucket: rate.NewLimiter(l.limit, l.burst)}
		l.entries.Add(key, e)
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

// size returns how many clients the limiter tracks.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entries.Len()
}

// rateLimits are the server's limiters and caps; a nil one is off.
type rateLimits struct {
	publicWrites *limiter
	signups      *limiter
	// codes limits the signups with a block code per user: codes cannot
	// be guessed by brute force.
	codes *limiter
	// streams caps the seat streams of each client address, eventWaits the
	// event feed long polls of each admin.
	streams    *slots
	eventWaits *slots
	// publicReads limits the public reads that reach PostgreSQL.
	publicReads *limiter
}

func newRateLimits(cfg Config) *rateLimits {
	reg := cfg.Registry
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capacityd_rate_limited_total",
		Help: "Requests refused with 429 by limit.",
	}, []string{"limit"})
	reg.MustRegister(refused)
	tracked := func(name string, size func() int) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "capacityd_rate_limit_clients",
			Help:        "Clients a rate limiter tracks.",
			ConstLabels: prometheus.Labels{"limit": name},
		}, func() float64 { return float64(size()) }))
	}
	rl := &rateLimits{}
	add := func(name string, l RateLimit) *limiter {
		if l.Off() {
			return nil
		}
		lim := newLimiter(l, time.Now, refused.WithLabelValues(name))
		tracked(name, lim.size)
		return lim
	}
	addSlots := func(name string, n, def int) *slots {
		if n < 0 {
			return nil
		}
		if n == 0 {
			n = def
		}
		s := newSlots(n, refused.WithLabelValues(name))
		tracked(name, s.clients)
		return s
	}
	rl.publicWrites = add("public_writes", cfg.PublicWriteLimit)
	rl.signups = add("signups", cfg.SignupLimit)
	rl.codes = add("block_codes", cfg.CodeLimit)
	rl.streams = addSlots("seat_streams_per_address", cfg.StreamsPerAddress, DefaultStreamsPerAddress)
	rl.eventWaits = addSlots("event_waits_per_user", cfg.EventWaitsPerUser, DefaultEventWaitsPerUser)
	rl.publicReads = add("public_reads", cfg.PublicReadLimit)
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

// takeStreamSlot takes one of the seat stream slots of the request's client
// address. It returns the function that gives it back, or a 429 when the
// address already holds its cap.
func (s *Server) takeStreamSlot(c echo.Context) (release func(), err error) {
	if s.limits == nil || s.limits.streams == nil {
		return func() {}, nil
	}
	release, ok := s.limits.streams.acquire(clientKey(c))
	if !ok {
		return nil, rateLimited(slotRetryAfter, "seat streams from this address")
	}
	return release, nil
}

// takeEventWaitSlot takes one of the event feed long poll slots of the
// calling admin. It returns the function that gives it back, or a 429 when
// the admin already holds the cap.
func (s *Server) takeEventWaitSlot(c echo.Context) (release func(), err error) {
	if s.limits == nil || s.limits.eventWaits == nil {
		return func() {}, nil
	}
	release, ok := s.limits.eventWaits.acquire(callerOf(c).UserID)
	if !ok {
		return nil, rateLimited(slotRetryAfter, "event feed long polls by this user")
	}
	return release, nil
}

// SharedLimiter keeps token buckets that all instances of the service
// share (in Redis), so that a client spreading its attempts over the
// instances gains nothing.
type SharedLimiter interface {
	// Allow takes one attempt of key's bucket, refilled at perSecond and
	// holding at most burst: false, and how long until the next attempt,
	// when it is empty; an error when the buckets cannot be reached.
	Allow(ctx context.Context, key string, perSecond float64, burst int) (bool, time.Duration, error)
}

// takeCodeAttempt takes one of the calling user's attempts of a block
// code: every signup with a code is one, right or wrong, so that codes
// cannot be guessed by brute force; a 429 when none is left. The
// attempts are counted across the instances (SharedAttempts) while that
// count can be reached, else by this instance alone.
func (s *Server) takeCodeAttempt(c echo.Context) error {
	if s.limits == nil || s.limits.codes == nil {
		return nil
	}
	user := callerOf(c).UserID
	if shared := s.cfg.SharedAttempts; shared != nil {
		l := s.cfg.CodeLimit
		ok, d, err := shared.Allow(c.Request().Context(), user, l.PerSecond, l.Burst)
		switch {
		case err != nil:
		case ok:
			return nil
		default:
			s.limits.codes.refused.Inc()
			return rateLimited(d, "signups with a block code by this user")
		}
	}
	if ok, d := s.limits.codes.allow(user); !ok {
		return rateLimited(d, "signups with a block code by this user")
	}
	return nil
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
