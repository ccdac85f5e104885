package note

import (
	"fmt"

	"github.com/physiciansnet/capacityd"
)

// Mode says which note ids a view or water may count on.
type Mode uint8

// The modes. Open counts on any well-formed id, creating its row at the
// first increment: convenient for development, but then anyone can create
// rows without end. Registered counts only on notes created beforehand by
// an admin (Service.Register); an increment of any other id is not_found
// and writes nothing.
const (
	Open Mode = iota
	Registered
)

// DefaultMode is the mode of a Service whose Config names none: Open, the
// contract's behaviour (every well-formed id counts). Production
// deployments choose Registered.
const DefaultMode = Open

// String returns "open" or "registered".
func (m Mode) String() string {
	if m == Registered {
		return "registered"
	}
	return "open"
}

// ParseMode reads "open" or "registered".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "open":
		return Open, nil
	case "registered":
		return Registered, nil
	}
	return Open, fmt.Errorf("want open or registered, got %q", s)
}

// NotRegistered is the not_found error of an increment of a note that has
// not been registered, in Registered mode.
func NotRegistered(noteID string) *capacityd.Error {
	return capacityd.Errorf(capacityd.ENotFound, "note %s is not registered", noteID)
}
