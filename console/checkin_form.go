package console

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
)

// listFields are the fields of a list's form, named as the API names
// them (the domain's messages start with these names).
var listFields = []string{"name", "activity_ids", "entry", "max_inside", "opens_at", "closes_at", "door_roles"}

// checkinForm is a list's form as the organiser typed it.
type checkinForm struct {
	Name, ActivityIDs, Entry, MaxInside, OpensAt, ClosesAt, DoorRoles string
}

// checkinFormData is the data of the form that creates or changes a list:
// its values, and the error to show beside Field (or above the form when
// Field is empty). Message is the domain's words; Key the console's own.
type checkinFormData struct {
	// ID is the list's id when the form changes one.
	ID      string
	Form    checkinForm
	Field   string
	Message string
	Key     string
}

// Entries are the entry rules the form offers.
func (checkinFormData) Entries() []checkin.Entry {
	return []checkin.Entry{checkin.EntryOnce, checkin.EntryReentry, checkin.EntryMultiple}
}

// HasError reports whether the form shows an error.
func (d checkinFormData) HasError() bool { return d.Message != "" || d.Key != "" }

// newCheckinList shows the empty form; ?activity= fills in an activity.
func (h *Handler) newCheckinList(w http.ResponseWriter, r *request) {
	f := checkinForm{Entry: string(checkin.EntryOnce), ActivityIDs: r.URL.Query().Get("activity")}
	h.render(w, r, http.StatusOK, "checkin_form", checkinFormData{Form: f})
}

// editCheckinList shows the form filled with a list's settings.
func (h *Handler) editCheckinList(w http.ResponseWriter, r *request) {
	l, err := h.cfg.Services.Checkins.GetList(r.Context(), r.PathValue("id"), caller(r.Request, r.grant))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f := checkinForm{Name: l.Name, ActivityIDs: strings.Join(l.ActivityIDs, " "), Entry: string(l.Entry),
		OpensAt: listInputTime(l.OpensAt, r.tz), ClosesAt: listInputTime(l.ClosesAt, r.tz), DoorRoles: strings.Join(l.DoorRoles, " ")}
	if l.MaxInside != nil {
		f.MaxInside = strconv.Itoa(*l.MaxInside)
	}
	h.render(w, r, http.StatusOK, "checkin_form", checkinFormData{ID: l.ID, Form: f})
}

// createCheckinList creates a list from the form and shows it.
func (h *Handler) createCheckinList(w http.ResponseWriter, r *request) {
	data := checkinFormData{Form: readCheckinForm(r)}
	v, ok := h.parseCheckinForm(w, r, data)
	if !ok {
		return
	}
	in := checkin.NewList{Name: v.name, ActivityIDs: v.activities, Entry: checkin.Entry(v.entry), MaxInside: v.maxInside,
		OpensAt: v.opensAt, ClosesAt: v.closesAt, DoorRoles: v.roles}
	l, err := h.cfg.Services.Checkins.CreateList(r.Context(), in)
	if err != nil {
		h.checkinFormFailed(w, r, data, err)
		return
	}
	http.Redirect(w, r.Request, Prefix+"/checkin-lists/"+l.ID+"?saved=1", http.StatusSeeOther)
}

// updateCheckinList changes every setting of a list to the form's.
func (h *Handler) updateCheckinList(w http.ResponseWriter, r *request) {
	data := checkinFormData{ID: r.PathValue("id"), Form: readCheckinForm(r)}
	v, ok := h.parseCheckinForm(w, r, data)
	if !ok {
		return
	}
	entry := checkin.Entry(v.entry)
	p := checkin.ListPatch{Name: &v.name, ActivityIDs: &v.activities, Entry: &entry, DoorRoles: &v.roles,
		MaxInside: registration.Optional[int]{Set: true, Value: v.maxInside},
		OpensAt:   registration.Optional[time.Time]{Set: true, Value: v.opensAt},
		ClosesAt:  registration.Optional[time.Time]{Set: true, Value: v.closesAt}}
	l, err := h.cfg.Services.Checkins.UpdateList(r.Context(), data.ID, p)
	if err != nil {
		h.checkinFormFailed(w, r, data, err)
		return
	}
	http.Redirect(w, r.Request, Prefix+"/checkin-lists/"+l.ID+"?saved=1", http.StatusSeeOther)
}

// readCheckinForm reads the posted form.
func readCheckinForm(r *request) checkinForm {
	v := r.PostFormValue
	return checkinForm{Name: v("name"), ActivityIDs: v("activity_ids"), Entry: v("entry"), MaxInside: strings.TrimSpace(v("max_inside")),
		OpensAt: strings.TrimSpace(v("opens_at")), ClosesAt: strings.TrimSpace(v("closes_at")), DoorRoles: v("door_roles")}
}

// listValues are a form's values in the domain's types.
type listValues struct {
	name, entry       string
	activities, roles []string
	maxInside         *int
	opensAt, closesAt *time.Time
}

// parseCheckinForm turns the form's text into values: a number that is
// not one, or a time that is not one, is shown beside its field (the
// domain checks everything else).
func (h *Handler) parseCheckinForm(w http.ResponseWriter, r *request, data checkinFormData) (listValues, bool) {
	f := data.Form
	v := listValues{name: f.Name, entry: f.Entry, activities: listWords(f.ActivityIDs), roles: listWords(f.DoorRoles)}
	if v.roles == nil {
		v.roles = []string{}
	}
	if f.MaxInside != "" {
		n, err := strconv.Atoi(f.MaxInside)
		if err != nil {
			data.Field, data.Key = "max_inside", "checkin.form.not_a_number"
			h.render(w, r, http.StatusUnprocessableEntity, "checkin_form", data)
			return v, false
		}
		v.maxInside = &n
	}
	for _, t := range []struct {
		field, text string
		to          **time.Time
	}{{"opens_at", f.OpensAt, &v.opensAt}, {"closes_at", f.ClosesAt, &v.closesAt}} {
		if t.text == "" {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02T15:04", t.text, r.tz)
		if err != nil {
			data.Field, data.Key = t.field, "checkin.form.not_a_time"
			h.render(w, r, http.StatusUnprocessableEntity, "checkin_form", data)
			return v, false
		}
		*t.to = &at
	}
	return v, true
}

// checkinFormFailed shows the form again with the domain's refusal beside
// its field; an error that is not the form's is the error page's.
func (h *Handler) checkinFormFailed(w http.ResponseWriter, r *request, data checkinFormData, err error) {
	code := capacityd.ErrorCode(err)
	field, msg := errorMessage(err, listFields...)
	switch {
	case code == capacityd.EInvalid && field == "" && strings.HasPrefix(msg, "a door role"):
		field = "door_roles"
	case code == capacityd.ENotFound && strings.HasPrefix(msg, "activity "):
		field = "activity_ids"
	case code != capacityd.EInvalid:
		h.fail(w, r, err)
		return
	}
	data.Field, data.Message = field, msg
	h.render(w, r, http.StatusUnprocessableEntity, "checkin_form", data)
}

// listWords splits a field of ids or roles at spaces and commas.
func listWords(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '，' || unicode.IsSpace(r) })
}

// listInputTime is t as a datetime-local input's value in tz.
func listInputTime(t *time.Time, tz *time.Location) string {
	if t == nil {
		return ""
	}
	return t.In(tz).Format("2006-01-02T15:04")
}
