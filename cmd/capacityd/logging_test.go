package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// accessLine is one access log line as the JSON format writes it.
type accessLine struct {
	Level, Msg, Method, Route, Duration, RequestID, Client, User string
	Status                                                       int
}

func parseLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		lines = append(lines, m)
	}
	return lines
}

func TestAccessLogLinesNameTheRequestAndNeverTheToken(t *testing.T) {
	t.Parallel()
	logs := &apptest.SyncBuffer{}
	inst := apptest.Start(t, apptest.Options{App: app.Options{Logger: newLogger(logs, slog.LevelDebug, "json")}})
	id := inst.CreateActivity(t, "logged", 5)
	user := inst.Token(t, "alice", false)
	signup := inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", user, `{}`)
	require.Equal(t, http.StatusCreated, signup.Status, "%s", signup.Body)
	forged := user[:strings.LastIndexByte(user, '.')] + ".forged"
	refused := inst.MustDo(t, http.MethodGet, "/v1/registrations/r_0000", forged, nil)
	require.Equal(t, http.StatusUnauthorized, refused.Status)
	inst.MustDo(t, http.MethodGet, "/healthz?token="+user, "", nil)

	byID := map[string]accessLine{}
	for _, m := range parseLines(t, logs.String()) {
		if m["msg"] != "request" {
			continue
		}
		b, _ := json.Marshal(m)
		var l accessLine
		require.NoError(t, json.Unmarshal(b, &l))
		l.RequestID, _ = m["request_id"].(string)
		require.NotEmpty(t, l.RequestID, "every line has the request id: %v", m)
		require.Regexp(t, regexp.MustCompile(`^[0-9.]+(ns|µs|ms|s)$`), l.Duration, "a duration, not nanoseconds")
		require.Equal(t, "127.0.0.1", l.Client)
		byID[l.RequestID] = l
	}
	got := byID[signup.Header.Get("X-Request-Id")]
	require.Equal(t, accessLine{Level: "INFO", Msg: "request", Method: "POST", Route: "/v1/activities/:id/registrations",
		Status: 201, Duration: got.Duration, RequestID: got.RequestID, Client: "127.0.0.1", User: "alice"}, got)
	bad := byID[refused.Header.Get("X-Request-Id")]
	require.Equal(t, 401, bad.Status)
	require.Equal(t, "/v1/registrations/:id", bad.Route)
	require.Empty(t, bad.User, "a refused token names no user")
	var probe *accessLine
	for _, l := range byID {
		if l.Route == "/healthz" {
			probe = &l
		}
	}
	require.NotNil(t, probe)
	require.Equal(t, "DEBUG", probe.Level, "probes log at debug")

	out := logs.String()
	for _, tok := range []string{user, forged, strings.Split(user, ".")[1], strings.Split(user, ".")[2], apptest.Secret} {
		require.NotContains(t, out, tok)
	}
}

func TestLogLevelAndFormat(t *testing.T) {
	t.Parallel()
	var text apptest.SyncBuffer
	newLogger(&text, slog.LevelWarn, "text").Info("hidden")
	newLogger(&text, slog.LevelWarn, "text").Warn("shutting down", "timeout", 15*time.Second)
	require.Equal(t, 1, strings.Count(text.String(), "\n"), text.String())
	require.Contains(t, text.String(), "level=WARN msg=\"shutting down\" timeout=15s")

	var js apptest.SyncBuffer
	newLogger(&js, slog.LevelDebug, "json").Debug("stopped", "took", 1500*time.Millisecond)
	require.Equal(t, "1.5s", parseLines(t, js.String())[0]["took"])

	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "INFO": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError} {
		l, err := parseLogLevel(in)
		require.NoError(t, err, in)
		require.Equal(t, want, l)
	}
	for _, bad := range []string{"", "verbose", "warn+1", "-4"} {
		_, err := parseLogLevel(bad)
		require.Error(t, err, bad)
	}
}
