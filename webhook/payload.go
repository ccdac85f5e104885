package webhook

import (
	"encoding/json"
	"fmt"
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
	Event        registration.Event
	Registration *registration.Registration
}

// MarshalJSON writes the event as the history shows it (registration.Event
// has its own MarshalJSON, which an embedded field would promote and so drop
// the registration) with the registration added as one more member.
func (d payloadData) MarshalJSON() ([]byte, error) {
	event, err := json.Marshal(d.Event)
	if err != nil {
		return nil, err
	}
	reg, err := json.Marshal(d.Registration)
	if err != nil {
		return nil, err
	}
	if len(event) < 2 || event[len(event)-1] != '}' {
		return nil, fmt.Errorf("webhook: event %s is not a JSON object", d.Event.ID)
	}
	out := make([]byte, 0, len(event)+len(reg)+len(`,"registration":`))
	out = append(out, event[:len(event)-1]...)
	if len(event) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"registration":`...)
	out = append(out, reg...)
	return append(out, '}'), nil
}

// Payload returns the body delivered for e. It is built once, when the
// event is recorded, and stored: every webhook and every retry sends the
// same bytes, whatever happens to the registration later.
func Payload(e registration.Event) ([]byte, error) {
	return json.Marshal(payload{Type: e.Type, Timestamp: e.At, Data: payloadData{Event: e, Registration: e.Registration}})
}
