package webhook

import (
	"math/rand/v2"
	"net/http"
	"time"
)

// Retry limits: attempts are at most MaxRetryDelay apart, and a delivery
// is retried for RetryWindow after its event, then failed.
const (
	DefaultRetryBase = 5 * time.Second
	MaxRetryDelay    = time.Hour
	RetryWindow      = 24 * time.Hour
)

// retryDelay is the delay after the attempt-th failed attempt: base, 2·base,
// 4·base, … each lengthened by up to a fifth at random (jitter in [0, 1))
// so that the retries of many deliveries spread out, and capped at
// MaxRetryDelay. No delay is shorter than base, and before the cap every
// delay is longer than the one before.
func retryDelay(base time.Duration, attempt int, jitter float64) time.Duration {
	d := min(base, MaxRetryDelay)
	for i := 1; i < attempt && d < MaxRetryDelay; i++ {
		d = min(2*d, MaxRetryDelay)
	}
	return min(d+time.Duration(float64(d)*0.2*jitter), MaxRetryDelay)
}

// judge decides what an attempt that got status (0: no answer) leads to.
// The delivery's event was recorded at created; now is when the attempt
// ended.
func judge(status, attempt int, created, now time.Time, base time.Duration) (Outcome, time.Duration) {
	switch {
	case status >= 200 && status < 300:
		return OutcomeDelivered, 0
	case status == http.StatusGone:
		return OutcomeGone, 0
	}
	d := retryDelay(base, attempt, rand.Float64())
	if now.Add(d).After(created.Add(RetryWindow)) {
		return OutcomeFailed, 0
	}
	return OutcomeRetry, d
}
