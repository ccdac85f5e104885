package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// serveDebug serves Go's profiles (/debug/pprof/…) on addr, a listener of
// its own that never shares the API's address, and returns a function that
// closes it. It is off unless DEBUG_ADDR is set.
func serveDebug(addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("DEBUG_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("profiles served", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// serveMetrics serves h (/metrics) on addr, a listener of its own (see
// METRICS_ADDR), and returns a function that closes it.
func serveMetrics(addr string, h http.Handler, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("METRICS_ADDR: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("metrics served", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
