package console

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// The helpers of the pools, series, blocks, on-sale and webhooks pages:
// their forms' values and problems, their lists' pages.

// poolsPageSize is how many items a list of pools, series or a series'
// activities shows at once.
const poolsPageSize = 50

// poolsFormError is what a form shows of a refused change: the message
// beside the field it names, or above the form when it names none.
type poolsFormError struct {
	Field   string
	Message string
}

// On reports whether the problem is the named field's.
func (e poolsFormError) On(field string) bool { return e.Message != "" && e.Field == field }

// Top reports whether the problem belongs to no field of the form.
func (e poolsFormError) Top() bool { return e.Message != "" && e.Field == "" }

// poolsRefusal is the form problem of a domain error that a form shows (a
// refused value, a full activity), ok false for the errors the error page
// shows (not found, unavailable, internal).
func poolsRefusal(err error, fields ...string) (poolsFormError, bool) {
	switch capacityd.ErrorCode(err) {
	case capacityd.ENotFound, capacityd.EForbidden, capacityd.EUnavailable, capacityd.EInternal, "":
		return poolsFormError{}, false
	}
	field, msg := errorMessage(err, fields...)
	if field == "" {
		// The webhook domain names its fields as `field "url": …`.
		for _, f := range fields {
			if strings.HasPrefix(msg, `field "`+f+`"`) {
				field = f
				break
			}
		}
	}
	return poolsFormError{Field: field, Message: msg}, msg != ""
}

// poolsFail shows an error of a list or a page: a malformed or unknown
// cursor, or an id of the wrong form, as a bad request; the others as
// fail does.
func (h *Handler) poolsFail(w http.ResponseWriter, r *request, err error) {
	if capacityd.IsCode(err, capacityd.EInvalid) {
		h.renderError(w, r, http.StatusBadRequest, "pools.bad_request")
		return
	}
	h.fail(w, r, err)
}

// poolsCursor is the id a list's "before" parameter names (a next_cursor
// of the listing of items with prefix), empty for the first page.
func poolsCursor(r *request, prefix string) (string, error) {
	c := r.URL.Query().Get("before")
	if c == "" {
		return "", nil
	}
	return registration.DecodeCursor(c, prefix)
}

// poolsInt reads a whole number field of a form; a value that is not one
// is a problem beside the field, in the page's language.
func (h *Handler) poolsInt(r *request, name string) (int, poolsFormError) {
	v := strings.TrimSpace(r.PostFormValue(name))
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, poolsFormError{Field: name, Message: h.locales.text(r.lang, "pools.whole_number")}
	}
	return n, poolsFormError{}
}

// poolsTime reads an optional datetime-local field in the organiser's time
// zone (nil when empty).
func (h *Handler) poolsTime(r *request, name string) (*time.Time, poolsFormError) {
	v := strings.TrimSpace(r.PostFormValue(name))
	if v == "" {
		return nil, poolsFormError{}
	}
	t, err := time.ParseInLocation("2006-01-02T15:04", v, r.tz)
	if err != nil {
		return nil, poolsFormError{Field: name, Message: h.locales.text(r.lang, "pools.bad_time")}
	}
	return &t, poolsFormError{}
}

// poolsNotFound reports whether err is a not_found (the page's thing does
// not exist).
func poolsNotFound(err error) bool {
	var ce *capacityd.Error
	return errors.As(err, &ce) && ce.Code == capacityd.ENotFound
}
