package httpapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Stream defaults.
const (
	defaultPingInterval = 15 * time.Second
	// streamWriteTimeout bounds each write to a stream: a client that does
	// not take an event within it is cut off.
	streamWriteTimeout = 10 * time.Second
)

var (
	pingComment = []byte(": ping\n\n")
	// retryField asks EventSource clients to wait two seconds before
	// reconnecting.
	retryField = []byte("retry: 2000\n\n")
)

// seatStream serves GET /v1/activities/{id}/seats/stream: a server-sent
// event "seats" with the current state at once (also when the client
// resumes with Last-Event-ID), then one on every change, and a ping comment
// every PingInterval. Errors (unknown activity, too many streams from the
// client's address or on the instance) are JSON responses sent before the
// stream starts. The stream ends when the client goes, falls behind, or the
// server shuts down, and gives its address's slot back then.
func (s *Server) seatStream(c echo.Context) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	if err := s.requireActivity(c, id); err != nil {
		return err
	}
	release, err := s.takeStreamSlot(c)
	if err != nil {
		return err
	}
	defer release()
	req := c.Request()
	ctx := req.Context()
	sub, err := s.cfg.Streams.Subscribe(ctx, id)
	if err != nil {
		return err
	}
	defer sub.Close()

	write := startEventStream(c)
	if !write(retryField, sub.Initial()) {
		return nil
	}
	ping := time.NewTicker(s.cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Done():
			return nil
		case ev := <-sub.Events():
			if !write(ev) {
				return nil
			}
		case <-ping.C:
			if !write(pingComment) {
				return nil
			}
		}
	}
}

// startEventStream answers 200 with a text/event-stream and returns the
// function that writes to it: each write has streamWriteTimeout to reach
// the client and is flushed, and it reports false once the client is
// gone. The server's read and write timeouts are for requests; a stream
// lives on, with a deadline per write instead.
func startEventStream(c echo.Context) func(parts ...[]byte) bool {
	w := c.Response()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream; charset=utf-8")
	h.Set(echo.HeaderCacheControl, "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return func(parts ...[]byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		for _, p := range parts {
			if _, err := w.Write(p); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
}
