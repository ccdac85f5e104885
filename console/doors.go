package console

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/checkin"
)

// doorDevice is the device a scan records when the page did not name
// one (a browser without scripts).
const doorDevice = "console"

// maxDoorPages bounds the pages of lists the landing page reads to find a
// door role's lists.
const maxDoorPages = 20

// doorRoutes registers the door pages of the check-in lists: an admin's,
// or a door role's of its own lists (the service refuses the others); the
// door's search of a list's registrations by user id; and the door's
// service worker, which keeps the page working offline (a static script,
// served without a session so that the browser's update checks never meet
// a sign-in page).
func (h *Handler) doorRoutes(r router) {
	r.mux.HandleFunc("GET "+Prefix+"/doors/sw.js", h.doorWorker)
	r.page("GET "+Prefix+"/doors/{list}", anyone, h.doorPage)
	r.page("POST "+Prefix+"/doors/{list}/redeem", anyone, h.redeemAtDoor)
	r.page("GET "+Prefix+"/doors/{list}/search", anyone, h.doorSearch)
}

// doorsOf is the check-in lists whose door roles the session's user has.
func (h *Handler) doorsOf(r *request) ([]DoorLink, error) {
	if h.cfg.Services.Checkins == nil || len(r.grant.Roles) == 0 {
		return nil, nil
	}
	var doors []DoorLink
	before := ""
	for range maxDoorPages {
		page, err := h.cfg.Services.Checkins.Lists(r.Context(), "", before, checkin.MaxListLimit)
		if err != nil {
			return nil, err
		}
		for _, l := range page.Items {
			if l.DoorOf(r.grant.Roles) {
				doors = append(doors, DoorLink{ID: l.ID, Title: l.Name})
			}
		}
		if page.NextCursor == nil {
			break
		}
		before = *page.NextCursor
	}
	return doors, nil
}

// doorPage shows a list's door: the scanner (door.js), its counts, live,
// and the scan form that also works without scripts.
func (h *Handler) doorPage(w http.ResponseWriter, r *request) {
	l, err := h.cfg.Services.Checkins.GetList(r.Context(), r.PathValue("list"), caller(r.Request, r.grant))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderDoor(w, r, http.StatusOK, doorData{List: l, Type: checkin.TypeEntry})
}

// renderDoor shows the door page with a new Idempotency-Key for its form
// and what the page's script needs.
func (h *Handler) renderDoor(w http.ResponseWriter, r *request, status int, data doorData) {
	data.Stream, data.Key = listStream(data.List.ID), newSecret()
	data.Activities = h.doorActivities(r, data.List)
	data.Config = h.doorConfig(r, data.List, data.Activities)
	h.render(w, r, status, "door", data)
}

// redeemAtDoor records a scan of a registration id or a ticket typed (or
// scanned) into the form, and shows what it did: the door page of a
// browser without scripts. The form's Idempotency-Key makes a form sent
// twice one scan: the second gets the first's answer.
func (h *Handler) redeemAtDoor(w http.ResponseWriter, r *request) {
	ctx, c := r.Context(), caller(r.Request, r.grant)
	l, err := h.cfg.Services.Checkins.GetList(ctx, r.PathValue("list"), c)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data := doorData{List: l, Code: strings.TrimSpace(r.PostFormValue("code")), Type: checkin.Type(r.PostFormValue("type"))}
	if data.Type == "" {
		data.Type = checkin.TypeEntry
	}
	if data.Code == "" {
		data.CodeError = "door.code_required"
		h.renderDoor(w, r, http.StatusUnprocessableEntity, data)
		return
	}
	device := strings.TrimSpace(r.PostFormValue("device"))
	if device == "" {
		device = doorDevice
	}
	in := checkin.RedeemInput{Type: data.Type, Device: device, IdempotencyKey: r.PostFormValue("key")}
	if strings.HasPrefix(data.Code, "r_") {
		in.RegistrationID = data.Code
	} else {
		in.Ticket = data.Code
	}
	// The field is left empty for the next scan, whatever this one did.
	data.Code = ""
	out, err := h.cfg.Services.Checkins.Redeem(ctx, l.ID, in, c)
	if err == nil {
		if out.List.ID == l.ID {
			data.List = out.List
		}
		data.Result = &doorResult{Outcome: out.Result, UserID: out.Registration.UserID, Seats: max(out.Registration.Seats, 1),
			RegistrationID: out.Registration.ID, Replayed: out.Replayed}
		h.renderDoor(w, r, http.StatusOK, data)
		return
	}
	var ce *capacityd.Error
	if !errors.As(err, &ce) || (ce.Code != capacityd.EInvalid && !slices.Contains(doorReasons, ce.Code)) {
		h.fail(w, r, err)
		return
	}
	data.Result = refusal(ce)
	status := http.StatusConflict
	if ce.Code == capacityd.EInvalid || ce.Code == capacityd.EInvalidTicket {
		status = http.StatusBadRequest
	}
	h.renderDoor(w, r, status, data)
}

// refusal is the result of a refused scan: the door's own words for the
// codes it knows, the domain's message for the others.
func refusal(ce *capacityd.Error) *doorResult {
	res := &doorResult{Outcome: "refused", Reason: "door.refused.other", Message: ce.Message, Previous: ce.Previous}
	if slices.Contains(doorReasons, ce.Code) {
		res.Reason, res.Message = "door.refused."+ce.Code, ""
	}
	if ce.Inside != nil && ce.MaxInside != nil {
		res.Inside, res.MaxInside = *ce.Inside, *ce.MaxInside
	}
	return res
}
