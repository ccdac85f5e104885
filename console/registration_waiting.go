package console

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/physiciansnet/capacityd/registration"
)

// waitingData is the data of an activity's waiting-line page.
type waitingData struct {
	Activity registration.Activity
	// Items are the waitlisted registrations of the page, in line order.
	Items []registration.Registration
	Paged bool
	Next  string
	// Seats are the display tier's numbers (nil when it cannot say), which
	// the seat stream keeps live.
	Seats *registration.Seats
	Error string
}

// registrationWaitingPage shows an activity's waiting line as the API
// shows it: its waitlisted registrations, each with its place in line
// (1: the next to get a seat), a page at a time.
func (h *Handler) registrationWaitingPage(w http.ResponseWriter, r *request) {
	svc := h.cfg.Services.Registrations
	id := r.PathValue("id")
	act, err := svc.GetActivity(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data := waitingData{Activity: act, Paged: r.URL.Query().Get("after") != ""}
	if h.cfg.Services.Seats != nil {
		if s, err := h.cfg.Services.Seats(r.Context(), id); err == nil {
			data.Seats = &s
		}
	}
	page, err := h.listRegistrations(r, id, registration.Waitlisted, "")
	if err != nil {
		status, _, msg, ok := regRefusal(err)
		if !ok {
			h.fail(w, r, err)
			return
		}
		data.Error = msg
		h.render(w, r, status, "waiting", data)
		return
	}
	// A page is in creation order, which is the order the line was
	// joined in; the positions say it.
	data.Items = slices.SortedStableFunc(slices.Values(page.Items), func(a, b registration.Registration) int {
		return cmp.Compare(waitlistPosition(a), waitlistPosition(b))
	})
	if page.NextCursor != nil {
		data.Next = regPageURL(r, *page.NextCursor)
	}
	h.render(w, r, http.StatusOK, "waiting", data)
}

// waitlistPosition is a waitlisted registration's place in line (0 if it has
// none).
func waitlistPosition(r registration.Registration) int { return derefPlace(r.WaitlistPosition) }
