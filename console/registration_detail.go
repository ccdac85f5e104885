package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// registrationAction is a change an admin makes on a registration's
// page: a form posted to /console/registrations/{id}/NAME.
type registrationAction struct {
	name string
	// fields are the form's fields a refusal's message may name.
	fields []string
	do     func(ctx context.Context, svc RegistrationService, r *request, id string) error
}

// registrationActions are the changes of a registration's page, each the
// service's command the API's route of the same name calls.
var registrationActions = []registrationAction{
	{name: "cancel", do: func(ctx context.Context, svc RegistrationService, r *request, id string) error {
		_, err := svc.Cancel(ctx, id, caller(r.Request, r.grant))
		return err
	}},
	{name: "status", fields: []string{"status"}, do: func(ctx context.Context, svc RegistrationService, r *request, id string) error {
		_, err := svc.SetStatus(ctx, id, registration.Status(r.PostFormValue("status")), caller(r.Request, r.grant))
		return err
	}},
	{name: "seats", fields: []string{"seats"}, do: func(ctx context.Context, svc RegistrationService, r *request, id string) error {
		// What is not a number is no number of seats: the service's
		// refusal of 0 says which are.
		n, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("seats")))
		if err != nil {
			n = 0
		}
		_, err = svc.ReduceSeats(ctx, id, n, caller(r.Request, r.grant))
		return err
	}},
	{name: "confirm", do: func(ctx context.Context, svc RegistrationService, r *request, id string) error {
		_, err := svc.Confirm(ctx, id, caller(r.Request, r.grant))
		return err
	}},
}

// registrationData is the data of a registration's page.
type registrationData struct {
	Reg      registration.Registration
	Activity registration.Activity
	Events   []registration.Event
	// Metadata is the registration's metadata as its JSON.
	Metadata string
	// Done names the change just made, if any, and Notice is its
	// message key.
	Done, Notice string
	// Failed is the refusal of the change just asked for, if any.
	Failed *actionRefusal
	// Seats is the seats field's value: what was asked for after a
	// refusal, else one fewer than the registration holds.
	Seats string
	// StatusTo are the statuses an admin moves a registration to.
	StatusTo []registration.Status
}

// actionRefusal is the domain's refusal of an action: the action, the
// field its message names (empty: the whole form), the message and its
// code, which the page explains in the organiser's language.
type actionRefusal struct {
	Action, Field, Message, Code string
}

// Explain is the message key that explains the refusal's code.
func (a actionRefusal) Explain() string {
	switch a.Code {
	case capacityd.EInvalid, capacityd.EInvalidTransition, capacityd.EActivityFull, capacityd.EAlreadyRegistered,
		capacityd.ELimitReached, capacityd.EConfirmationClosed:
		return "registrations.refused." + a.Code
	}
	return "registrations.refused.other"
}

// Active reports whether the registration holds or waits for a seat.
func (d registrationData) Active() bool { return d.Reg.Status.Active() }

// Occupying reports whether the registration holds a seat.
func (d registrationData) Occupying() bool { return d.Reg.Status.Occupying() }

// Cancelled reports whether the registration was cancelled.
func (d registrationData) Cancelled() bool { return d.Reg.Status == registration.Cancelled }

// registrationNotices are the notices a registration's page shows after
// a change (its query's done), by action.
var registrationNotices = []string{"cancel", "status", "seats", "confirm"}

// registrationPage shows a registration: its fields, its history and the
// changes an admin can ask for.
func (h *Handler) registrationPage(w http.ResponseWriter, r *request) {
	data, err := h.registrationData(r, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if done := r.URL.Query().Get("done"); slices.Contains(registrationNotices, done) {
		data.Done, data.Notice = done, "registrations.done."+done
	}
	h.render(w, r, http.StatusOK, "registration", data)
}

// registrationData reads a registration, its activity and its events.
func (h *Handler) registrationData(r *request, id string) (registrationData, error) {
	svc := h.cfg.Services.Registrations
	c := caller(r.Request, r.grant)
	reg, err := svc.GetRegistration(r.Context(), id, c)
	if err != nil {
		return registrationData{}, err
	}
	act, err := svc.GetActivity(r.Context(), reg.ActivityID)
	if err != nil {
		return registrationData{}, err
	}
	events, err := svc.RegistrationEvents(r.Context(), id, c)
	if err != nil {
		return registrationData{}, err
	}
	d := registrationData{Reg: reg, Activity: act, Events: events, Metadata: string(reg.Metadata),
		Seats:    strconv.Itoa(max(reg.Seats-1, 1)),
		StatusTo: []registration.Status{registration.AwaitingPayment, registration.Approved}}
	return d, nil
}

// registrationAction serves an action's form: the change through the
// service, then back to the registration's page with a notice (303), or
// the page again with the domain's refusal beside the form.
func (h *Handler) registrationAction(a registrationAction) pageFunc {
	return func(w http.ResponseWriter, r *request) {
		id := r.PathValue("id")
		err := a.do(r.Context(), h.cfg.Services.Registrations, r, id)
		if err == nil {
			http.Redirect(w, r.Request, Prefix+"/registrations/"+url.PathEscape(id)+"?done="+a.name, http.StatusSeeOther)
			return
		}
		status, field, msg, ok := regRefusal(err, a.fields...)
		if !ok {
			h.fail(w, r, err)
			return
		}
		data, rerr := h.registrationData(r, id)
		if rerr != nil {
			h.fail(w, r, rerr)
			return
		}
		data.Failed = &actionRefusal{Action: a.name, Field: field, Message: msg, Code: capacityd.ErrorCode(err)}
		if a.name == "seats" {
			data.Seats = r.PostFormValue("seats")
		}
		h.render(w, r, status, "registration", data)
	}
}

// FailedAt is the refusal of the action named, or nil.
func (d registrationData) FailedAt(action string) *actionRefusal {
	if d.Failed == nil || d.Failed.Action != action {
		return nil
	}
	return d.Failed
}

// Key is the message key prefix+v for a status, cancel reason or event
// type, given as a value or a pointer (empty for nil).
func (registrationData) Key(prefix string, v any) string {
	switch v := v.(type) {
	case *registration.Status:
		if v != nil {
			return prefix + string(*v)
		}
	case *registration.CancelReason:
		if v != nil {
			return prefix + string(*v)
		}
	case registration.Status:
		return prefix + string(v)
	case registration.CancelReason:
		return prefix + string(v)
	case registration.EventType:
		return prefix + string(v)
	}
	return ""
}

// Place is a waiting-list position's number (0 for none).
func (registrationData) Place(p *int) int { return derefPlace(p) }
