package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Client talks to one capacityd. It is safe for concurrent use; copies
// made with WithToken share its *http.Client.
type Client struct {
	// BaseURL is the service's URL, e.g. "http://127.0.0.1:8080".
	BaseURL string
	// HTTP sends the requests.
	HTTP *http.Client
	// Token is the bearer token sent with every request; empty sends none
	// (public routes need none).
	Token string
}

// New returns a Client of the service at baseURL that sends token. A nil
// hc means http.DefaultClient.
func New(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{BaseURL: strings.TrimSuffix(baseURL, "/"), HTTP: hc, Token: token}
}

// WithToken returns a copy of c that sends token instead.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.Token = token
	return &cp
}

// Error codes, stable across versions.
const (
	CodeInvalidRequest      = "invalid_request"
	CodeUnauthenticated     = "unauthenticated"
	CodeForbidden           = "forbidden"
	CodeNotFound            = "not_found"
	CodeMethodNotAllowed    = "method_not_allowed"
	CodeActivityFull        = "activity_full"
	CodeAlreadyRegistered   = "already_registered"
	CodeLimitReached        = "limit_reached"
	CodeRegistrationClosed  = "registration_closed"
	CodeAdmissionRequired   = "admission_required"
	CodeInvalidTransition   = "invalid_transition"
	CodeIdempotencyConflict = "idempotency_conflict"
	CodePayloadTooLarge     = "payload_too_large"
	CodeRateLimited         = "rate_limited"
	CodeUnavailable         = "unavailable"
	CodeInvalidTicket       = "invalid_ticket"
	CodeTicketRevoked       = "ticket_revoked"
	CodeWrongList           = "wrong_list"
	CodeCheckinClosed       = "checkin_closed"
	CodeAlreadyCheckedIn    = "already_checked_in"
	CodeNotInside           = "not_inside"
	CodeRoomFull            = "room_full"
	CodeConfirmationClosed  = "confirmation_closed"
)

// Error is a response the service sent instead of the one asked for.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the error's stable code (Code* constants); empty when the
	// body was not in the error shape.
	Code string
	// Message is the service's message for people.
	Message string
	// RegistrationID is set with already_registered: the registration the
	// user already holds.
	RegistrationID string
	// Remaining is set with activity_full: the seats a signup could get
	// at that moment (nil when the service did not say).
	Remaining *int
	// RegistrationIDs is set with limit_reached: the active registrations
	// the user holds in the activity's series, sorted.
	RegistrationIDs []string
	// OpensAt and ClosesAt are set with registration_closed: the
	// activity's signup window (nil: open on that side).
	OpensAt, ClosesAt *time.Time
	// Previous is set with already_checked_in: the registration's first
	// entry through the check-in list.
	Previous *PreviousEntry
	// Inside and MaxInside are set with room_full: the seats inside the
	// check-in list's room and its limit.
	Inside, MaxInside *int
	// RetryAfter is the Retry-After header (429 and 503); zero when absent.
	RetryAfter time.Duration
}

// PreviousEntry is the entry an already_checked_in refusal names.
type PreviousEntry struct {
	At     time.Time `json:"at"`
	Device string    `json:"device"`
	ListID string    `json:"list_id"`
}

// Error implements error.
func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("capacityd: status %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("capacityd: %d %s: %s", e.Status, e.Code, e.Message)
}

// IsCode reports whether err is an *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// request is one call: what to send and which statuses are success.
type request struct {
	method string
	path   string
	query  url.Values
	body   any // nil: no body; []byte sent as is; else JSON
	header http.Header
	ok     []int
}

// do sends r and returns the response when its status is one of r.ok;
// otherwise it reads the body and returns an *Error. The caller closes the
// response body.
func (c *Client) do(ctx context.Context, r request) (*http.Response, error) {
	u := c.BaseURL + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var rd io.Reader
	if r.body != nil {
		b, ok := r.body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(r.body); err != nil {
				return nil, fmt.Errorf("capacityd: encode %s %s: %w", r.method, r.path, err)
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if slices.Contains(r.ok, resp.StatusCode) {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, readError(resp)
}

// readError builds the *Error of a refused request.
func readError(resp *http.Response) *Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header)}
	var body struct {
		Error struct {
			Code           string `json:"code"`
			Message        string `json:"message"`
			RegistrationID string `json:"registration_id"`
			Remaining      *int   `json:"remaining"`
			// RegistrationIDs is set with limit_reached.
			RegistrationIDs []string `json:"registration_ids"`
			// OpensAt and ClosesAt are set with registration_closed.
			OpensAt  *time.Time `json:"opens_at"`
			ClosesAt *time.Time `json:"closes_at"`
			// Previous is set with already_checked_in; Inside and
			// MaxInside with room_full.
			Previous  *PreviousEntry `json:"previous"`
			Inside    *int           `json:"inside"`
			MaxInside *int           `json:"max_inside"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message, e.RegistrationID = body.Error.Code, body.Error.Message, body.Error.RegistrationID
		e.Remaining, e.RegistrationIDs = body.Error.Remaining, body.Error.RegistrationIDs
		e.OpensAt, e.ClosesAt = body.Error.OpensAt, body.Error.ClosesAt
		e.Previous, e.Inside, e.MaxInside = body.Error.Previous, body.Error.Inside, body.Error.MaxInside
		return e
	}
	e.Message = strings.TrimSpace(string(b))
	if len(e.Message) > 200 {
		e.Message = e.Message[:200] + "…"
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// retryAfter returns the Retry-After header in seconds, zero when absent.
func retryAfter(h http.Header) time.Duration {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// call sends r and decodes a JSON answer into out (nil: no body expected).
// It returns the response's status and headers.
func (c *Client) call(ctx context.Context, r request, out any) (int, http.Header, error) {
	resp, err := c.do(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, resp.Header, fmt.Errorf("capacityd: decode %s %s: %w", r.method, r.path, err)
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body) // so the connection is reused
	return resp.StatusCode, resp.Header, nil
}

// get sends a GET and decodes a 200 into out.
func (c *Client) get(ctx context.Context, path string, query url.Values, out any) error {
	_, _, err := c.call(ctx, request{method: http.MethodGet, path: path, query: query, ok: []int{http.StatusOK}}, out)
	return err
}

// post sends a POST of body and decodes a 200 into out.
func (c *Client) post(ctx context.Context, path string, body, out any) error {
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: path, body: body, ok: []int{http.StatusOK}}, out)
	return err
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

// pageQuery returns the query of a paged list.
func pageQuery(limit int, cursor string) url.Values {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q
}
