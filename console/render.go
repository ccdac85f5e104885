package console

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd"
)

// templateFuncs are the functions every template may call.
var templateFuncs = template.FuncMap{
	"join": strings.Join,
	"itoa": strconv.Itoa,
}

// view is what a template renders: the page's data and what the layout
// needs (the session's user, the language, the CSRF token), with the
// methods that turn keys and times into the organiser's words.
type view struct {
	req  *request
	h    *Handler
	Data any
	// Status is the page's HTTP status (error pages show it).
	Status int
}

// T is the message key in the page's language, formatted with args.
func (v view) T(key string, args ...any) string { return v.h.locales.text(v.req.lang, key, args...) }

// Lang is the page's language tag.
func (v view) Lang() string { return v.req.lang }

// Languages are the languages the organiser can switch to.
func (v view) Languages() []string { return Languages }

// CSRF is the token every form of the session carries.
func (v view) CSRF() string { return v.req.csrf }

// User is the session's user id; empty without a session.
func (v view) User() string { return v.req.grant.Sub }

// Admin reports whether the session's user is an admin.
func (v view) Admin() bool { return v.req.grant.Admin() }

// Path is the page's path and query, for forms that come back to it.
func (v view) Path() string { return v.req.URL.RequestURI() }

// Date shows t in the organiser's time zone (empty for the zero time).
func (v view) Date(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.In(v.req.tz).Format("2006-01-02 15:04:05 MST")
}

// DatePtr shows *t, or nothing for nil.
func (v view) DatePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return v.Date(*t)
}

// InputTime is t as a datetime-local input's value in the organiser's
// time zone (empty for nil).
func (v view) InputTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.In(v.req.tz).Format("2006-01-02T15:04")
}

// TimeZone is the name of the time zone dates are shown in.
func (v view) TimeZone() string { return v.req.tz.String() }

// render writes the page of template name with data.
func (h *Handler) render(w http.ResponseWriter, r *request, status int, name string, data any) {
	page, ok := h.pages[name]
	if !ok {
		h.fail(w, r, errors.New("no template "+name))
		return
	}
	var buf bytes.Buffer
	if err := page.ExecuteTemplate(&buf, "layout", view{req: r, h: h, Data: data, Status: status}); err != nil {
		h.cfg.Logger.Error("console page", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	pageHeaders(w.Header())
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// pageHeaders are the headers of every page: no script or style but the
// console's own files, no framing, no referrer, no caching.
func pageHeaders(hd http.Header) {
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin") // a form's Origin is sent (not "null"); nothing leaves for other sites
	hd.Set("Cache-Control", "no-store")
}

// errorPage is the data of the error page: the message's key.
type errorPage struct {
	Key string
}

// renderError shows the message key as a page of the given status.
func (h *Handler) renderError(w http.ResponseWriter, r *request, status int, key string) {
	h.render(w, r, status, "error", errorPage{Key: key})
}

// fail shows a domain error as the API would classify it: a bad request,
// a refusal, a missing thing, or the service being unavailable; anything
// else is logged and shown as an internal error.
func (h *Handler) fail(w http.ResponseWriter, r *request, err error) {
	code := capacityd.ErrorCode(err)
	status, key := http.StatusInternalServerError, "error.internal"
	switch code {
	case capacityd.ENotFound:
		status, key = http.StatusNotFound, "error.not_found"
	case capacityd.EForbidden:
		status, key = http.StatusForbidden, "error.forbidden"
	case capacityd.EUnavailable:
		status, key = http.StatusServiceUnavailable, "error.unavailable"
	default:
		h.cfg.Logger.Error("console", "path", r.URL.Path, "err", err)
	}
	h.render(w, r, status, "error", errorPage{Key: key})
}

// errorMessage is the domain error's message, for a form that shows it
// beside its field, and the field it names (the first word of messages
// such as "capacity must be between 1 and …"), empty when none.
func errorMessage(err error, fields ...string) (field, msg string) {
	var ce *capacityd.Error
	if !errors.As(err, &ce) {
		return "", ""
	}
	first, _, _ := strings.Cut(ce.Message, " ")
	for _, f := range fields {
		if f == first || strings.HasPrefix(first, f+".") || strings.HasPrefix(first, f+"[") {
			return f, ce.Message
		}
	}
	return "", ce.Message
}
