package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/note"
)

func TestNoteSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://x@y/z", "CAPACITY_JWT_SECRET": goodSecret}
	c, err := loadConfig("serve", serveSettings, nil, envOf(base), io.Discard, nil)
	require.NoError(t, err)
	require.False(t, c.App.Notes.CombiningOff, "combining is on by default")
	require.Equal(t, 1000, c.App.Notes.MaxBatch)
	require.Equal(t, note.Open, c.App.Notes.Mode, "open by default, the contract's behaviour")
	require.Equal(t, time.Minute, c.App.HTTP.WaterWindow)

	env := map[string]string{"NOTE_COMBINING": "off", "NOTE_MAX_BATCH": "64", "NOTES_MODE": "registered", "NOTE_WATER_WINDOW": "0s"}
	for k, v := range base {
		env[k] = v
	}
	c, err = loadConfig("serve", serveSettings, nil, envOf(env), io.Discard, nil)
	require.NoError(t, err)
	require.True(t, c.App.Notes.CombiningOff)
	require.Equal(t, 64, c.App.Notes.MaxBatch)
	require.Equal(t, note.Registered, c.App.Notes.Mode)
	require.Zero(t, c.App.HTTP.WaterWindow, "0s turns the water limit off")
	c, err = loadConfig("serve", serveSettings, []string{"--note-combining", "on"}, envOf(env), io.Discard, nil)
	require.NoError(t, err)
	require.False(t, c.App.Notes.CombiningOff, "the flag overrides the environment")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--note-combining", "yes"}, `NOTE_COMBINING (--note-combining): want on or off, got "yes"`},
		{[]string{"--note-combining", ""}, "NOTE_COMBINING (--note-combining)"},
		{[]string{"--note-max-batch", "0"}, "NOTE_MAX_BATCH (--note-max-batch)"},
		{[]string{"--note-max-batch", "many"}, "NOTE_MAX_BATCH (--note-max-batch)"},
		{[]string{"--notes-mode", "signed"}, `NOTES_MODE (--notes-mode): want open or registered, got "signed"`},
		{[]string{"--notes-mode", ""}, "NOTES_MODE (--notes-mode)"},
		{[]string{"--note-water-window", "-1s"}, "NOTE_WATER_WINDOW (--note-water-window)"},
		{[]string{"--note-water-window", "60"}, "NOTE_WATER_WINDOW (--note-water-window)"},
		{[]string{"--note-water-window", "25h"}, "NOTE_WATER_WINDOW (--note-water-window)"},
	} {
		_, err := loadConfig("serve", serveSettings, tc.args, envOf(base), io.Discard, nil)
		require.Error(t, err, "%v", tc.args)
		require.Contains(t, err.Error(), tc.want)
	}
}
