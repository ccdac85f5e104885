package console

import (
	"net/http"
	"slices"
	"strings"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// fieldSpec is one field of the activity form: its name (the API's name
// of the field, and the form's), the input it is, and for a select its
// options. Its label is the message "activities.field.NAME", its hint
// "activities.hint.NAME", an option's label
// "activities.option.NAME.OPTION".
type fieldSpec struct {
	name     string
	kind     string
	options  []string
	required bool
}

// Kinds of inputs.
const (
	kindText     = "text"
	kindNumber   = "number"
	kindTime     = "datetime-local"
	kindCheckbox = "checkbox"
	kindSelect   = "select"
)

// fieldsetSpec is a group of the form's fields under a legend
// ("activities.legend.NAME").
type fieldsetSpec struct {
	name   string
	fields []fieldSpec
}

// activityFieldsets are the activity form's fields: every field of an
// activity that the API's create and patch accept, grouped as the API's
// documentation groups them. Their ranges are the domain's to check.
var activityFieldsets = []fieldsetSpec{
	{"basics", []fieldSpec{
		{name: "title", kind: kindText, required: true},
		{name: "capacity", kind: kindNumber, required: true},
		{name: "hold_seconds", kind: kindNumber},
	}},
	{"waitlist", []fieldSpec{
		{name: "waitlist", kind: kindCheckbox},
		{name: "waitlist_policy", kind: kindSelect, options: []string{string(registration.PolicyStrict), string(registration.PolicyFill)}},
		{name: "max_seats_per_registration", kind: kindNumber},
	}},
	{"sharing", []fieldSpec{
		{name: "pools", kind: kindText},
		{name: "series_id", kind: kindText},
	}},
	{"window", []fieldSpec{
		{name: "opens_at", kind: kindTime},
		{name: "closes_at", kind: kindTime},
		{name: "queue", kind: kindCheckbox},
		{name: "queue.admit_per_second", kind: kindNumber},
		{name: "queue.max_admitted", kind: kindNumber},
		{name: "queue.token_seconds", kind: kindNumber},
		{name: "queue.absent_seconds", kind: kindNumber},
	}},
	{"schedule", []fieldSpec{
		{name: "starts_at", kind: kindTime},
		{name: "ends_at", kind: kindTime},
		{name: "attendance_percent", kind: kindNumber},
		{name: "confirm_by", kind: kindTime},
		{name: "release_no_shows_after_minutes", kind: kindNumber},
	}},
}

// activityFieldNames are the names of the form's fields, for errorMessage
// to find the one a domain error names.
var activityFieldNames = func() []string {
	var names []string
	for _, fs := range activityFieldsets {
		for _, f := range fs.fields {
			names = append(names, f.name)
		}
	}
	// "series not found: s_…" names the series_id field. A name that
	// begins another (queue, queue.max_admitted) comes after it, so that
	// errorMessage finds the longer.
	names = append(names, "series")
	slices.SortStableFunc(names, func(a, b string) int { return len(b) - len(a) })
	return names
}()

// activityForm is the activity form as the organiser typed it, and the
// messages shown beside its fields.
type activityForm struct {
	// ID is the activity's id when it is edited, empty for a new one;
	// Title is its title as stored.
	ID, Title string
	values    map[string]string
	errors    map[string]string
	// Error is a message that names no field.
	Error string
}

// formField is what the template shows of one field.
type formField struct {
	Name, ID, Kind, Value string
	Label, Hint           string
	Checked, Required     bool
	Options               []formOption
	// Error is the message beside the field; ErrorID and HintID are the
	// ids of the elements that describe the input.
	Error, ErrorID, HintID string
}

// formOption is one option of a select.
type formOption struct {
	Value, Label string
	Selected     bool
}

// formFieldset is a legend and its fields.
type formFieldset struct {
	Legend string
	Fields []formField
}

// Fieldsets are the form's fields to show, with what was typed and the
// messages beside them.
func (f activityForm) Fieldsets() []formFieldset {
	out := make([]formFieldset, 0, len(activityFieldsets))
	for _, fs := range activityFieldsets {
		set := formFieldset{Legend: "activities.legend." + fs.name}
		for _, spec := range fs.fields {
			id := "f-" + strings.ReplaceAll(strings.ReplaceAll(spec.name, ".", "-"), "_", "-")
			field := formField{Name: spec.name, ID: id, Kind: spec.kind, Value: f.values[spec.name],
				Label: "activities.field." + spec.name, Hint: "activities.hint." + spec.name, HintID: id + "-hint",
				Checked: f.values[spec.name] == "on", Required: spec.required, Error: f.errors[spec.name]}
			if field.Error != "" {
				field.ErrorID = id + "-error"
			}
			for _, o := range spec.options {
				field.Options = append(field.Options, formOption{Value: o, Label: "activities.option." + spec.name + "." + o,
					Selected: f.values[spec.name] == o})
			}
			set.Fields = append(set.Fields, field)
		}
		out = append(out, set)
	}
	return out
}

// Invalid reports whether a message is shown.
func (f activityForm) Invalid() bool { return f.Error != "" || len(f.errors) > 0 }

// Action is the path the form is sent to.
func (f activityForm) Action() string {
	if f.ID == "" {
		return Prefix + "/activities"
	}
	return Prefix + "/activities/" + f.ID
}

// newActivityForm is an empty form with the API's defaults.
func newActivityForm() activityForm {
	return activityForm{values: map[string]string{
		"hold_seconds": "900", "waitlist_policy": string(registration.PolicyStrict), "max_seats_per_registration": "1",
		"queue.token_seconds": "120", "queue.absent_seconds": "60",
	}, errors: map[string]string{}}
}

// readActivityForm is the form as the request sent it.
func readActivityForm(r *request) activityForm {
	f := activityForm{values: map[string]string{}, errors: map[string]string{}}
	for _, name := range activityFieldNames {
		f.values[name] = strings.TrimSpace(r.PostFormValue(name))
	}
	// The title is kept as typed: the domain says what a title may be.
	f.values["title"] = r.PostFormValue("title")
	return f
}

// newActivityPage shows the form of a new activity.
func (h *Handler) newActivityPage(w http.ResponseWriter, r *request) {
	h.render(w, r, http.StatusOK, "activity_form", newActivityForm())
}

// createActivity creates the activity the form describes, and shows its
// dashboard; or the form again, with the message beside its field.
func (h *Handler) createActivity(w http.ResponseWriter, r *request) {
	f := readActivityForm(r)
	in, ok := h.parseActivity(r, &f).newActivity()
	if !ok {
		h.render(w, r, http.StatusUnprocessableEntity, "activity_form", f)
		return
	}
	a, err := h.cfg.Services.Activities.CreateActivity(r.Context(), in)
	if err != nil {
		h.formError(w, r, f, err)
		return
	}
	http.Redirect(w, r.Request, Prefix+"/activities/"+a.ID+"?saved=1", http.StatusSeeOther)
}

// editActivityPage shows the form of an activity, filled with its
// settings.
func (h *Handler) editActivityPage(w http.ResponseWriter, r *request) {
	a, err := h.cfg.Services.Activities.GetActivity(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "activity_form", activityFormOf(a, r))
}

// updateActivity changes the fields of the activity that the organiser
// changed (a patch of those only, with the organiser as the caller), and
// shows its dashboard; or the form again, with the message beside its
// field.
func (h *Handler) updateActivity(w http.ResponseWriter, r *request) {
	ctx, id := r.Context(), r.PathValue("id")
	a, err := h.cfg.Services.Activities.GetActivity(ctx, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f := readActivityForm(r)
	f.ID, f.Title = a.ID, a.Title
	patch, changed, ok := h.parseActivity(r, &f).patchOf(a, r)
	if !ok {
		h.render(w, r, http.StatusUnprocessableEntity, "activity_form", f)
		return
	}
	if changed {
		if _, err := h.cfg.Services.Activities.UpdateActivity(ctx, id, patch, caller(r.Request, r.grant)); err != nil {
			h.formError(w, r, f, err)
			return
		}
	}
	http.Redirect(w, r.Request, Prefix+"/activities/"+id+"?saved=1", http.StatusSeeOther)
}

// formError shows the form again with the domain's message beside the
// field it names (or above the fields), for a request the domain found
// invalid; any other error is the error page's.
func (h *Handler) formError(w http.ResponseWriter, r *request, f activityForm, err error) {
	if capacityd.ErrorCode(err) != capacityd.EInvalid {
		h.fail(w, r, err)
		return
	}
	field, msg := errorMessage(err, activityFieldNames...)
	switch field {
	case "":
		f.Error = msg
	case "series":
		f.errors["series_id"] = msg
	default:
		f.errors[field] = msg
	}
	h.render(w, r, http.StatusUnprocessableEntity, "activity_form", f)
}
