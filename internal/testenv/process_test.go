package testenv

import (
	"os/exec"
	"strconv"
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
	port, err := strconv.Atoi(first.Addr[strings.LastIndexByte(first.Addr, ':')+1:])
	require.NoError(t, err)
	second := redisOn(t, "redis", bin, port)
	t.Cleanup(second.p.abandon)
	require.NoError(t, second.p.start(), "the port answers: the first server")
	require.ErrorIs(t, second.ownsPort(), errPortTaken)
	second.p.abandon()
	require.NoError(t, first.ownsPort(), "the first server is untouched")
}
