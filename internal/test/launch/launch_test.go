package launch_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/test/launch"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

const secret = "launch-test-secret-launch-test-secret-launch"

func binary(t *testing.T) string {
	t.Helper()
	testenv.SkipShort(t, "a build of capacityd")
	bin, err := launch.Build(t.Context(), launch.BuildOptions{})
	require.NoError(t, err)
	again, err := launch.Build(t.Context(), launch.BuildOptions{})
	require.NoError(t, err)
	require.Equal(t, bin, again, "built once per process")
	return bin
}

func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestAKilledProcessStartsAgainOnItsAddress: a process is healthy when
// Start returns and serves /metrics on its own address; killed, it starts
// again from its Config on the same address, writing to the same Output,
// and SIGTERM stops it cleanly.
func TestAKilledProcessStartsAgainOnItsAddress(t *testing.T) {
	t.Parallel()
	cfg := launch.Config{Binary: binary(t), Env: []string{
		"DATABASE_URL=" + testenv.NewDatabase(t), "REDIS_URL=" + testenv.RedisURL(), "CAPACITY_JWT_SECRET=" + secret}}
	p, err := launch.Start(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	require.Positive(t, p.PID())
	require.Equal(t, http.StatusOK, status(t, p.URL+"/healthz"))
	require.Equal(t, http.StatusOK, status(t, p.URL+"/metrics"))

	p.Kill()
	require.True(t, p.Exited())
	first := p.Output()
	again, err := launch.Start(t.Context(), p.Config())
	require.NoError(t, err)
	t.Cleanup(again.Kill)
	require.Equal(t, p.URL, again.URL)
	require.NotEqual(t, p.PID(), again.PID())
	require.Equal(t, http.StatusOK, status(t, again.URL+"/healthz"))
	require.True(t, strings.HasPrefix(again.Output(), first), "the runs share their Output")

	again.Stop(20 * time.Second)
	require.Equal(t, 0, again.Wait(time.Second), again.Output())
}

// TestAProcessThatExitsAtStartIsAnErrorThatQuotesIt: Start does not wait
// out its timeout for a process that ended, and says why it did.
func TestAProcessThatExitsAtStartIsAnErrorThatQuotesIt(t *testing.T) {
	t.Parallel()
	_, err := launch.Start(t.Context(), launch.Config{Binary: binary(t), Env: []string{"DATABASE_URL=", "CAPACITY_JWT_SECRET=" + secret}})
	require.ErrorContains(t, err, "exited at start")
	require.ErrorContains(t, err, "DATABASE_URL (--database-url): is required")
}

func TestOutputKeepsTheLastMaxBytes(t *testing.T) {
	t.Parallel()
	o := &launch.Output{Max: 5}
	for _, s := range []string{"abc", "defg", "h"} {
		n, err := o.Write([]byte(s))
		require.NoError(t, err)
		require.Equal(t, len(s), n)
	}
	require.Equal(t, "defgh", o.String())
	require.Equal(t, "…gh", o.Tail(2))
	require.Equal(t, "defgh", o.Tail(5))

	var all launch.Output
	_, _ = all.Write([]byte("abc"))
	_, _ = all.Write([]byte("defg"))
	require.Equal(t, "abcdefg", all.String())
}
