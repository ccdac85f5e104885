package testenv

import "testing"

// SkipShort skips t when the tests run with -short, saying which service
// t needs: `go test -short ./...` runs every test that needs no data
// service, with PostgreSQL and Redis unreachable. Outside a test binary,
// or for a T that cannot skip (a Session), it does nothing.
func SkipShort(t T, needs string) {
	if !testing.Testing() || !testing.Short() {
		return
	}
	if s, ok := t.(interface{ Skipf(string, ...any) }); ok {
		t.Helper()
		s.Skipf("-short: needs %s", needs)
	}
}
