// Package client is a typed Go client of capacityd's HTTP API, written
// against its description (api/openapi.yaml; docs/api.md renders it). One
// method per route; every refusal is returned as an *Error with the
// service's stable code.
//
//	c := client.New("http://127.0.0.1:8080", token, nil)
//	res, err := c.Signup(ctx, activityID, client.SignupOptions{IdempotencyKey: "order-42"})
//	var e *client.Error
//	if errors.As(err, &e) && e.Code == client.CodeAlreadyRegistered {
//		// e.RegistrationID is the registration the user already has.
//	}
//
// # Module and versions
//
// The client is a Go module of its own, github.com/physiciansnet/capacityd/client,
// that imports only the standard library: requiring it adds nothing else
// to a program's go.mod and go.sum.
//
//	go get github.com/physiciansnet/capacityd/client@vX.Y.Z
//
// It is released with the service: the commit tagged vX.Y.Z (the
// service) is also tagged client/vX.Y.Z (this module), so a client speaks
// the API of the service with the same version. The service builds
// against the client in its own tree (a replace in its go.mod).
package client
