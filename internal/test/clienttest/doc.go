// Package clienttest holds the tests of the typed client
// (github.com/physiciansnet/capacityd/client) that need the service: against
// running instances (apptest), against api/openapi.yaml (apicheck), and of
// what requiring the client module adds to a program. The client module's
// own tests use the standard library only, so that it requires nothing.
package clienttest
