package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// parseLogLevel reads LOG_LEVEL: debug, info, warn or error.
func parseLogLevel(v string) (slog.Level, error) {
	var l slog.Level
	switch strings.ToLower(v) {
	case "debug", "info", "warn", "error":
		return l, l.UnmarshalText([]byte(v))
	}
	return l, fmt.Errorf("want debug, info, warn or error, got %q", v)
}

// newLogger returns the service's logger: JSON or text lines on w from
// level up, with durations written as durations ("1.5s", "350µs") rather
// than as nanoseconds.
func newLogger(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationsAsText}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// durationsAsText writes a time.Duration attribute as its String form.
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
