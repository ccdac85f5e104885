package webhook

import (
	"encoding/json"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

// payload is the body of a delivery, as the Standard Webhooks specification
// shapes it: the event type, when it happened, and the event with the
// registration as its change left it.
type payload struct {
	Type      registration.EventType `json:"type"`
	Timestamp time.Time              `json:"timestamp"`
	Data      payloadData            `json:"data"`
}

type payloadData struct {
	registration.Event
	Registration *registration.Registration `json:"registration"`
}

// Payload returns the body delivered for e. It is built once, when the
// event is recorded, and stored: every webhook and every retry sends the
// same bytes, whatever happens to the registration later.
func Payload(e registration.Event) ([]byte, error) {
	return json.Marshal(payload{Type: e.Type, Timestamp: e.At, Data: payloadData{Event: e, Registration: e.Registration}})
}
