package apicheck

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// Transport is an http.RoundTripper that checks every exchange against the
// description and reports what breaks it. Requests and responses pass
// through unchanged; JSON and YAML response bodies are read whole first
// and handed on as a fresh reader, other bodies are handed on unread.
type Transport struct {
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Checker checks the exchanges.
	Checker *Checker
	// Report receives every violation; nil: a violation is returned as the
	// exchange's error, so that whoever sent the request sees it.
	Report func(error)
}

// NewTransport returns a Transport over base that checks against the
// embedded description and reports violations to t as test errors.
func NewTransport(t testing.TB, base http.RoundTripper) *Transport {
	t.Helper()
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return &Transport{Base: base, Checker: c, Report: func(err error) { t.Errorf("apicheck: %v", err) }}
}

// RoundTrip sends req and checks the exchange.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		reqBody = b
		out := req.Clone(req.Context())
		out.Body = io.NopCloser(bytes.NewReader(b))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		req = out
	}
	base := tr.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	var respBody []byte
	if req.Method != http.MethodHead && readsBody(resp.Header.Get("Content-Type")) {
		respBody, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(respBody))
	} else if resp.StatusCode == http.StatusNoContent {
		respBody = []byte{}
	}
	if v := tr.Checker.Check(req, reqBody, resp, respBody); v != nil {
		if tr.Report == nil {
			resp.Body.Close()
			return nil, v
		}
		tr.Report(v)
	}
	return resp, nil
}
