package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/registration"
)

// fakeRegistrations answers the registrations pages from memory: one
// activity, one registration, and the error each change is to meet.
type fakeRegistrations struct {
	act       registration.Activity
	reg       registration.Registration
	changeErr error
	listErr   error
	calls     []string
}

func (f *fakeRegistrations) GetActivity(_ context.Context, id string) (registration.Activity, error) {
	if id != f.act.ID {
		return registration.Activity{}, registration.ActivityNotFound(id)
	}
	return f.act, nil
}

func (f *fakeRegistrations) ListRegistrations(_ context.Context, lf registration.ListFilter) (registration.Page, error) {
	f.calls = append(f.calls, "list "+string(lf.Status)+" "+lf.After)
	return registration.Page{Items: []registration.Registration{f.reg}}, f.listErr
}

func (f *fakeRegistrations) ActivityUserRegistrations(_ context.Context, uf registration.ActivityUserFilter) (registration.Page, error) {
	f.calls = append(f.calls, "user "+uf.UserID)
	return registration.Page{Items: []registration.Registration{}}, f.listErr
}

func (f *fakeRegistrations) GetRegistration(_ context.Context, id string, _ registration.Caller) (registration.Registration, error) {
	if id != f.reg.ID {
		return registration.Registration{}, registration.RegistrationNotFound(id)
	}
	return f.reg, nil
}

func (f *fakeRegistrations) RegistrationEvents(context.Context, string, registration.Caller) ([]registration.Event, error) {
	return []registration.Event{{Type: registration.EventCreated, To: registration.Pending, Seats: f.reg.Seats, Actor: "user:alice", At: f.reg.CreatedAt}}, nil
}

func (f *fakeRegistrations) change(name string, c registration.Caller) (registration.Registration, error) {
	f.calls = append(f.calls, name+" by "+c.Actor())
	return f.reg, f.changeErr
}

func (f *fakeRegistrations) Cancel(_ context.Context, _ string, c registration.Caller) (registration.Registration, error) {
	return f.change("cancel", c)
}

func (f *fakeRegistrations) SetStatus(_ context.Context, _ string, to registration.Status, c registration.Caller) (registration.Registration, error) {
	return f.change("status "+string(to), c)
}

func (f *fakeRegistrations) ReduceSeats(_ context.Context, _ string, n int, c registration.Caller) (registration.Registration, error) {
	return f.change("seats "+strings.Repeat("|", n), c)
}

func (f *fakeRegistrations) Confirm(_ context.Context, _ string, c registration.Caller) (registration.Registration, error) {
	return f.change("confirm", c)
}

// TestRegistrationPagesShowTheDomainsAnswers: the pages call the service
// as the session's admin; a change made goes back to the registration
// with its notice (303); a refusal of the domain is the page again with
// its message (409, 400), while a missing registration, an unavailable
// service or an unknown failure is an error page (404, 503, 500); a
// malformed cursor is refused on the list page itself.
func TestRegistrationPagesShowTheDomainsAnswers(t *testing.T) {
	t.Parallel()
	now := time.Now()
	fake := &fakeRegistrations{
		act: registration.Activity{ID: "a_01JDQ8ZB7Q1W3N8Y6V0K2H5M4C", Title: "Journal club", Capacity: 2},
		reg: registration.Registration{ID: "r_01JDQ90M2X7C4B9E1T6R3Y8W5Z", ActivityID: "a_01JDQ8ZB7Q1W3N8Y6V0K2H5M4C",
			UserID: "alice", Status: registration.Pending, Seats: 2, Metadata: []byte(`{"seat":"front"}`), CreatedAt: now, UpdatedAt: now},
	}
	st := newMemSessions()
	h, err := console.New(console.Config{Sessions: st, BaseURL: "http://localhost:8080",
		Services: console.Services{Registrations: fake}})
	require.NoError(t, err)
	cookie := signIn(t, h, st, "ana", "admin")
	page := get(t, h, http.MethodGet, "/console/registrations/"+fake.reg.ID, cookie)
	require.Equal(t, http.StatusOK, page.Code)
	body := page.Body.String()
	require.Contains(t, body, `{&#34;seat&#34;:&#34;front&#34;}`)
	require.Contains(t, body, `data-actor="user:alice"`)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)[1]
	post := func(action string, form url.Values) *httptest.ResponseRecorder {
		form.Set("csrf", csrf)
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/console/registrations/"+fake.reg.ID+"/"+action, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.AddCookie(cookie)
		h.ServeHTTP(w, r)
		return w
	}

	w := post("seats", url.Values{"seats": {"1"}})
	require.Equal(t, http.StatusSeeOther, w.Code)
	require.Equal(t, "/console/registrations/"+fake.reg.ID+"?done=seats", w.Header().Get("Location"))
	require.Contains(t, get(t, h, http.MethodGet, w.Header().Get("Location"), cookie).Body.String(), "The seats were given back.")
	require.Equal(t, http.StatusSeeOther, post("status", url.Values{"status": {"approved"}}).Code)
	require.Equal(t, []string{"seats | by admin:ana", "status approved by admin:ana"}, fake.calls)

	fake.changeErr = capacityd.Errorf(capacityd.EInvalidTransition, "registration %s cannot move from pending to pending", fake.reg.ID)
	w = post("status", url.Values{"status": {"pending"}})
	require.Equal(t, http.StatusConflict, w.Code)
	require.Contains(t, w.Body.String(), "cannot move from pending to pending")
	require.Contains(t, w.Body.String(), `id="status-error"`)
	fake.changeErr = capacityd.Errorf(capacityd.EInvalid, "seats must be between 1 and 100")
	w = post("seats", url.Values{"seats": {"many"}})
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.Contains(t, w.Body.String(), `value="many"`)
	require.Contains(t, w.Body.String(), `aria-invalid="true"`)
	require.Equal(t, "seats  by admin:ana", fake.calls[len(fake.calls)-1], "what is not a number goes to the service as 0")
	for code, status := range map[string]int{capacityd.ENotFound: http.StatusNotFound, capacityd.EUnavailable: http.StatusServiceUnavailable,
		capacityd.EInternal: http.StatusInternalServerError} {
		fake.changeErr = capacityd.Errorf(code, "no")
		require.Equal(t, status, post("cancel", url.Values{}).Code, code)
	}
	require.Equal(t, http.StatusNotFound, get(t, h, http.MethodGet, "/console/registrations/r_01JDQ90M2X7C4B9E1T6R3Y8W00", cookie).Code)

	list := "/console/activities/" + fake.act.ID + "/registrations"
	require.Equal(t, http.StatusOK, get(t, h, http.MethodGet, list, cookie).Code)
	bad := get(t, h, http.MethodGet, list+"?after=nonsense", cookie)
	require.Equal(t, http.StatusBadRequest, bad.Code)
	require.Contains(t, bad.Body.String(), "malformed cursor")
	require.Equal(t, http.StatusNotFound, get(t, h, http.MethodGet, "/console/activities/a_01JDQ8ZB7Q1W3N8Y6V0K2H5M00/waiting", cookie).Code)
	waiting := get(t, h, http.MethodGet, "/console/activities/"+fake.act.ID+"/waiting", cookie)
	require.Equal(t, http.StatusOK, waiting.Code)
	require.NotContains(t, waiting.Body.String(), "data-stream", "no display tier: no live numbers")
	require.Equal(t, "list waitlisted ", fake.calls[len(fake.calls)-1])
}
