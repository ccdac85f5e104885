package main

import (
	"net/url"
	"strings"
)

// benchDatabaseURL returns the bench database: BENCH_DATABASE_URL, else
// DATABASE_URL's server with the database capacityd_bench, else the local
// server's.
func benchDatabaseURL(getenv func(string) string) string {
	if u := getenv("BENCH_DATABASE_URL"); u != "" {
		return u
	}
	if u, err := url.Parse(getenv("DATABASE_URL")); err == nil && u.Host != "" {
		u.Path = "/capacityd_bench"
		return u.String()
	}
	return "postgres://postgres@127.0.0.1:5432/capacityd_bench?sslmode=disable"
}

// benchRedisURL returns the bench Redis: BENCH_REDIS_URL, else
// REDIS_URL's server with logical database 2, else the local server's.
func benchRedisURL(getenv func(string) string) string {
	if u := getenv("BENCH_REDIS_URL"); u != "" {
		return u
	}
	if u, err := url.Parse(getenv("REDIS_URL")); err == nil && u.Host != "" && strings.HasPrefix(u.Scheme, "redis") {
		u.Path = "/2"
		return u.String()
	}
	return "redis://127.0.0.1:6379/2"
}
