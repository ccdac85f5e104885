package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// eventStream is an open server-sent event stream: the body of a GET
// answered 200 with text/event-stream.
type eventStream struct {
	body io.ReadCloser
	r    *bufio.Reader
}

// openStream opens the event stream at path.
func (c *Client) openStream(ctx context.Context, path string) (eventStream, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: path,
		header: http.Header{"Accept": {"text/event-stream"}}, ok: []int{http.StatusOK}})
	if err != nil {
		return eventStream{}, err
	}
	return eventStream{body: resp.Body, r: bufio.NewReader(resp.Body)}, nil
}

// next waits for the next event named name and decodes its data into v;
// what describes the event in an error. Events of other names, comments
// and events without data are passed over.
func (s eventStream) next(name, what string, v any) error {
	var event, data string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if event == name && data != "" {
				if err := json.Unmarshal([]byte(data), v); err != nil {
					return fmt.Errorf("capacityd: %s: %w", what, err)
				}
				return nil
			}
			event, data = "", ""
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
}

// close closes the stream.
func (s eventStream) close() error { return s.body.Close() }
