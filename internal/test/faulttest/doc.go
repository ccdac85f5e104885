// Package faulttest holds the end-to-end fault tests: a
// PostgreSQL outage on a private cluster, stuck dependencies (a held
// admission lock, servers that accept connections and never answer) and
// SIGTERM under load against the real binary. Every test runs whole
// instances on real servers; nothing is mocked.
package faulttest
