package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAdmissionGatherSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x@y/z", "CAPACITY_JWT_SECRET": goodSecret}
	c, err := loadConfig("serve", serveSettings, nil, envOf(base), io.Discard, nil)
	require.NoError(t, err)
	require.Equal(t, 64, c.App.Change.GatherAt)
	require.Equal(t, 50*time.Millisecond, c.App.Change.GatherFor)

	c, err = loadConfig("serve", serveSettings, []string{"--admission-gather", "0s", "--admission-gather-at", "128"}, envOf(base), io.Discard, nil)
	require.NoError(t, err)
	require.Zero(t, c.App.Change.GatherFor, "0s turns gathering off")
	require.Equal(t, 128, c.App.Change.GatherAt)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--admission-gather", "-1ms"}, `ADMISSION_GATHER (--admission-gather): want a duration from 0s to 1s such as 50ms, got "-1ms"`},
		{[]string{"--admission-gather", "2s"}, "ADMISSION_GATHER (--admission-gather)"},
		{[]string{"--admission-gather", "soon"}, "ADMISSION_GATHER (--admission-gather)"},
		{[]string{"--admission-gather-at", "0"}, "ADMISSION_GATHER_AT (--admission-gather-at)"},
	} {
		_, err := loadConfig("serve", serveSettings, tc.args, envOf(base), io.Discard, nil)
		require.Error(t, err, "%v", tc.args)
		require.Contains(t, err.Error(), tc.want)
	}
}
