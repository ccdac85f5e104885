package console

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/checkin"
)

// doorDevice is the device the door page's scans record.
const doorDevice = "console"

// maxDoorPages bounds the pages of lists the landing page reads to find a
// door role's lists.
const maxDoorPages = 20

// doorRoutes registers the door pages of the check-in lists: an admin's,
// or a door role's of its own lists (the service refuses the others).
func (h *Handler) doorRoutes(r router) {
	r.page("GET "+Prefix+"/doors/{list}", anyone, h.doorPage)
	r.page("POST "+Prefix+"/doors/{list}/redeem", anyone, h.redeemAtDoor)
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

// doorData is the data of a door page: the list with its counts, the
// scan form (its Idempotency-Key, new at every page), and the last scan's
// result.
type doorData struct {
	List   checkin.List
	Stream string
	Key    string
	// Code and Type are the form's values; CodeError the key of the
	// message beside the code.
	Code      string
	Type      checkin.Type
	CodeError string
	Result    *doorResult
}

// Types are the scan types the form offers.
func (doorData) Types() []checkin.Type { return []checkin.Type{checkin.TypeEntry, checkin.TypeExit} }

// doorResult is what a scan did: entered, exited or refused.
type doorResult struct {
	Outcome string
	// Reason is the catalogue key of a refusal's words; Message the
	// domain's own, for a refusal those words do not cover.
	Reason   string
	Message  string
	Previous *capacityd.PreviousEntry
	// Inside and MaxInside are a room_full refusal's.
	Inside, MaxInside int
	// UserID, Seats and RegistrationID are an accepted scan's.
	UserID         string
	Seats          int
	RegistrationID string
	Replayed       bool
}

// doorReasons are the refusals the door page has its own words for.
var doorReasons = []string{capacityd.ETicketRevoked, capacityd.EWrongList, capacityd.ECheckinClosed, capacityd.EAlreadyCheckedIn,
	capacityd.ENotInside, capacityd.ERoomFull, capacityd.EInvalidTicket, capacityd.ENotFound, capacityd.EIdempotencyConflict}

// doorPage shows a list's door: its counts, live, and the scan form.
func (h *Handler) doorPage(w http.ResponseWriter, r *request) {
	l, err := h.cfg.Services.Checkins.GetList(r.Context(), r.PathValue("list"), caller(r.Request, r.grant))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderDoor(w, r, http.StatusOK, doorData{List: l, Type: checkin.TypeEntry})
}

// renderDoor shows the door page with a new Idempotency-Key for its form.
func (h *Handler) renderDoor(w http.ResponseWriter, r *request, status int, data doorData) {
	data.Stream, data.Key = listStream(data.List.ID), newSecret()
	h.render(w, r, status, "door", data)
}

// redeemAtDoor records a scan of a registration id or a ticket typed (or
// scanned) into the form, and shows what it did. The form's
// Idempotency-Key makes a form sent twice one scan: the second gets the
// first's answer.
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
		data.CodeError = "checkin.door.code_required"
		h.renderDoor(w, r, http.StatusUnprocessableEntity, data)
		return
	}
	in := checkin.RedeemInput{Type: data.Type, Device: doorDevice, IdempotencyKey: r.PostFormValue("key")}
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
	res := &doorResult{Outcome: "refused", Reason: "checkin.door.refused.other", Message: ce.Message, Previous: ce.Previous}
	if slices.Contains(doorReasons, ce.Code) {
		res.Reason, res.Message = "checkin.door.refused."+ce.Code, ""
	}
	if ce.Inside != nil && ce.MaxInside != nil {
		res.Inside, res.MaxInside = *ce.Inside, *ce.MaxInside
	}
	data.Result = res
	status := http.StatusConflict
	if ce.Code == capacityd.EInvalid || ce.Code == capacityd.EInvalidTicket {
		status = http.StatusBadRequest
	}
	h.renderDoor(w, r, status, data)
}
