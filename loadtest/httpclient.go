package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Client talks to one capacityd over keep-alive connections.
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client of the service at base, which must be on the
// loopback interface: load is never sent anywhere else.
func NewClient(base string) (*Client, error) {
	if err := checkLoopback(base); err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2048,
		MaxIdleConnsPerHost: 2048,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &Client{base: base, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

// checkLoopback refuses a service URL whose host is not 127.0.0.1,
// ::1 or localhost.
func checkLoopback(base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("loadtest: service URL: %w", err)
	}
	switch u.Hostname() {
	case "127.0.0.1", "::1", "localhost":
		return nil
	}
	return fmt.Errorf("loadtest: service URL %q: load goes to 127.0.0.1 only", base)
}

// Close closes idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Do sends one request and returns its status and, when into is not nil,
// decodes a JSON body into it. The body is always read whole so the
// connection is reused.
func (c *Client) Do(ctx context.Context, method, path, token string, body []byte, into any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if into != nil && resp.StatusCode < 300 {
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// Expect sends one request and returns an error unless the status is want.
func (c *Client) Expect(ctx context.Context, want int, method, path, token string, body []byte, into any) error {
	st, err := c.Do(ctx, method, path, token, body, into)
	if err != nil {
		return err
	}
	if st != want {
		return fmt.Errorf("%s %s: status %d, want %d", method, path, st, want)
	}
	return nil
}

// Text fetches path and returns its body.
func (c *Client) Text(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
	return string(b), err
}

// CreateActivity creates an activity and returns its id.
func (c *Client) CreateActivity(ctx context.Context, adminToken, title string, capacity int) (string, error) {
	body, _ := json.Marshal(map[string]any{"title": title, "capacity": capacity})
	var a struct {
		ID string `json:"id"`
	}
	if err := c.Expect(ctx, http.StatusCreated, http.MethodPost, "/v1/activities", adminToken, body, &a); err != nil {
		return "", fmt.Errorf("loadtest: create activity: %w", err)
	}
	return a.ID, nil
}

// Activity is what GET /v1/activities/{id} returns that the scenarios use.
type Activity struct {
	Capacity int `json:"capacity"`
	Taken    int `json:"taken"`
}

// Seats is what GET /v1/activities/{id}/seats returns.
type Seats struct {
	Taken    int    `json:"taken"`
	Capacity int    `json:"capacity"`
	Source   string `json:"source"`
}
