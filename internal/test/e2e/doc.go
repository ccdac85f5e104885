// Package e2e holds the end-to-end tests of registrations and webhooks:
// each starts whole capacityd instances (internal/test/apptest) on real
// PostgreSQL and Redis and talks to them over HTTP, as a client would. The
// unit tests of those packages stay beside their code.
package e2e
