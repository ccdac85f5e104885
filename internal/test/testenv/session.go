package testenv

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// T is what testenv needs from whoever uses it: a test (every testing.TB
// is one), or a program such as the load test's soak, through a Session.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Session lets a program use testenv's private servers outside a test: it
// logs to a logger, runs the cleanups when it is closed (the last
// registered first), and turns a failure into an error of Do instead of a
// failed test.
type Session struct {
	log      *slog.Logger
	mu       sync.Mutex
	cleanups []func()
}

// NewSession returns a Session that logs to log.
func NewSession(log *slog.Logger) *Session { return &Session{log: log} }

// sessionFailure carries a Fatalf out of Do.
type sessionFailure struct{ err error }

// Do runs f and returns the failure f reported with Fatalf, if any.
func (s *Session) Do(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			sf, ok := r.(sessionFailure)
			if !ok {
				panic(r)
			}
			err = sf.err
		}
	}()
	f()
	return nil
}

// Helper does nothing: a program has no test helpers to skip in reports.
func (s *Session) Helper() {}

// Fatalf logs the failure and ends the function run by Do with it.
func (s *Session) Fatalf(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	s.log.Error("testenv failure", "err", err)
	panic(sessionFailure{err})
}

// Cleanup registers f to run at Close.
func (s *Session) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

// TempDir returns a new directory, removed at Close.
func (s *Session) TempDir() string {
	dir, err := os.MkdirTemp("", "capacityd-env-")
	if err != nil {
		s.Fatalf("testenv: %v", err)
	}
	s.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Close runs the cleanups, the last registered first.
func (s *Session) Close() {
	s.mu.Lock()
	fs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
