package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/loadtest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestBenchURLs(t *testing.T) {
	t.Parallel()
	require.Equal(t, "postgres://postgres@127.0.0.1:5432/capacityd_bench?sslmode=disable", benchDatabaseURL(env(nil)))
	require.Equal(t, "postgres://postgres@127.0.0.1:55432/capacityd_bench?sslmode=disable",
		benchDatabaseURL(env(map[string]string{"DATABASE_URL": "postgres://postgres@127.0.0.1:55432/capacityd?sslmode=disable"})))
	require.Equal(t, "postgres://x/y_bench", benchDatabaseURL(env(map[string]string{"BENCH_DATABASE_URL": "postgres://x/y_bench"})))
	require.Equal(t, "redis://127.0.0.1:6379/2", benchRedisURL(env(nil)))
	require.Equal(t, "redis://127.0.0.1:56379/2", benchRedisURL(env(map[string]string{"REDIS_URL": "redis://127.0.0.1:56379/0"})))
}

func TestRunFlags(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	f, err := parseRunFlags([]string{"-quick"}, env(nil), &stderr)
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, f.scenario)
	require.Equal(t, 2*time.Second, f.baseline)
	f, err = parseRunFlags(nil, env(nil), &stderr)
	require.NoError(t, err)
	require.Equal(t, 10*time.Second, f.scenario)
	_, err = parseRunFlags([]string{"-url", "http://127.0.0.1:8080"}, env(nil), &stderr)
	require.ErrorContains(t, err, "-secret")
}

func TestDoorDevicesFlagShapesTheDoorRush(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	f, err := parseRunFlags([]string{"-quick"}, env(nil), &stderr)
	require.NoError(t, err)
	require.Equal(t, loadtest.FullSizes.DoorDevices, f.config(nil).DoorDevices, "make bench's devices by default")
	f, err = parseRunFlags([]string{"-quick", "-only", "door_rush", "-door-devices", "64"}, env(nil), &stderr)
	require.NoError(t, err)
	require.Equal(t, 64, f.config(nil).DoorDevices)
	for _, bad := range []string{"1", "0", "-3", "1001"} {
		_, err = parseRunFlags([]string{"-door-devices", bad}, env(nil), &stderr)
		require.ErrorContains(t, err, "-door-devices: door_rush runs at 2 to 1000 devices", bad)
	}
}

func TestQuickRunLeavesOutTheDoorRushAndTheDashboards(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	f, err := parseRunFlags([]string{"-quick"}, env(nil), &stderr)
	require.NoError(t, err)
	cfg := f.config(nil)
	require.Equal(t, loadtest.QuickSizes, cfg.Sizes)
	require.Equal(t, []string{loadtest.ScenarioDoorRush, loadtest.ScenarioDashboards}, cfg.Skip)
	f, err = parseRunFlags([]string{"-quick", "-only", "signup_hot,door_rush"}, env(nil), &stderr)
	require.NoError(t, err)
	cfg = f.config(nil)
	require.Empty(t, cfg.Skip, "asked for by name")
	require.Equal(t, []string{"signup_hot", "door_rush"}, cfg.Only)
	f, err = parseRunFlags(nil, env(nil), &stderr)
	require.NoError(t, err)
	require.Empty(t, f.config(nil).Skip, "the full run has every step")
}

func TestDispatch(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.Error(t, run(context.Background(), nil, env(nil), &out, &errOut))
	require.ErrorContains(t, run(context.Background(), []string{"nope"}, env(nil), &out, &errOut), `unknown command "nope"`)
	require.NoError(t, run(context.Background(), []string{"help"}, env(nil), &out, &errOut))
	require.Contains(t, out.String(), "seed")
}
