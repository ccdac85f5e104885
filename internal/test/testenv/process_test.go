package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// TestKillWorkingInReachesProcessesOutsideTheGroup starts a process in a
// session of its own working in a directory, as PostgreSQL's children do
// in their data directory: killWorkingIn kills it, and leaves alone one
// working elsewhere.
func TestKillWorkingInReachesProcessesOutsideTheGroup(t *testing.T) {
	t.Parallel()
	start := func(dir string) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	data := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(data, "node1"), 0o755))
	inside, outside := start(filepath.Join(data, "node1")), start(t.TempDir())

	killWorkingIn(data)
	err := inside.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the process working in the directory was killed")
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())
	require.NoError(t, outside.Process.Signal(syscall.Signal(0)), "the process working elsewhere still runs")
}
