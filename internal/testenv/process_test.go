package testenv

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestARedisServerWhosePortIsTakenIsNotTakenForTheOther starts a second
// redis-server on the port of a first one, as a parallel test's server may
// take a port between FreePort and the bind: its start sees the port
// answer (the first server), and ownsPort tells that it is not its own.
func TestARedisServerWhosePortIsTakenIsNotTakenForTheOther(t *testing.T) {
	t.Parallel()
	first := PrivateRedis(t)
	require.NoError(t, first.ownsPort())

	bin, err := exec.LookPath("redis-server")
	require.NoError(t, err)
	port := first.Addr[strings.LastIndexByte(first.Addr, ':')+1:]
	second := &RedisServer{Addr: first.Addr, p: &process{t: t, name: "redis", addr: first.Addr, argv: []string{
		bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no",
	}}}
	t.Cleanup(second.p.abandon)
	require.NoError(t, second.p.start(), "the port answers: the first server")
	require.ErrorIs(t, second.ownsPort(), errPortTaken)
	second.p.abandon()
	require.NoError(t, first.ownsPort(), "the first server is untouched")
}
