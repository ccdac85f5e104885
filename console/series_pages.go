package console

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/physiciansnet/capacityd/registration"
)

// seriesRoutes registers the series pages.
func (h *Handler) seriesRoutes(r router) {
	r.page("GET "+Prefix+"/series", adminOnly, h.seriesListPage)
	r.page("GET "+Prefix+"/series/new", adminOnly, h.newSeriesPage)
	r.page("POST "+Prefix+"/series", adminOnly, h.createSeries)
	r.page("GET "+Prefix+"/series/{id}", adminOnly, h.seriesPage)
	r.page("GET "+Prefix+"/series/{id}/edit", adminOnly, h.editSeriesPage)
	r.page("POST "+Prefix+"/series/{id}", adminOnly, h.updateSeries)
}

// seriesList is the data of the list of series.
type seriesList struct {
	Items []registration.Series
	Next  string
}

// seriesListPage lists the series, newest first, a keyset page at a time.
func (h *Handler) seriesListPage(w http.ResponseWriter, r *request) {
	before, err := poolsCursor(r, registration.SeriesCursor)
	if err != nil {
		h.poolsFail(w, r, err)
		return
	}
	page, err := h.cfg.Services.Pools.ListSeries(r.Context(), before, poolsPageSize)
	if err != nil {
		h.poolsFail(w, r, err)
		return
	}
	data := seriesList{Items: page.Items}
	if page.NextCursor != nil {
		data.Next = *page.NextCursor
	}
	h.render(w, r, http.StatusOK, "series", data)
}

// seriesForm is the data of the form that creates or edits a series.
type seriesForm struct {
	// ID is the series' when editing, empty when creating.
	ID         string
	Title      string
	MaxPerUser string
	Err        poolsFormError
}

// newSeriesPage is the form of a new series.
func (h *Handler) newSeriesPage(w http.ResponseWriter, r *request) {
	h.render(w, r, http.StatusOK, "series_form", seriesForm{MaxPerUser: "1"})
}

// readSeriesForm reads the form's values, and a limit that is not a whole
// number as its problem.
func (h *Handler) readSeriesForm(r *request) (seriesForm, int) {
	f := seriesForm{Title: strings.TrimSpace(r.PostFormValue("title")), MaxPerUser: strings.TrimSpace(r.PostFormValue("max_per_user"))}
	n, bad := h.poolsInt(r, "max_per_user")
	f.Err = bad
	return f, n
}

// seriesFormFailed shows the form again with the domain's refusal.
func (h *Handler) seriesFormFailed(w http.ResponseWriter, r *request, f seriesForm, err error) {
	problem, ok := poolsRefusal(err, "title", "max_per_user")
	if !ok {
		h.fail(w, r, err)
		return
	}
	f.Err = problem
	h.render(w, r, http.StatusUnprocessableEntity, "series_form", f)
}

// createSeries creates a series and shows it.
func (h *Handler) createSeries(w http.ResponseWriter, r *request) {
	f, limit := h.readSeriesForm(r)
	if f.Err.Message != "" {
		h.render(w, r, http.StatusUnprocessableEntity, "series_form", f)
		return
	}
	s, err := h.cfg.Services.Pools.CreateSeries(r.Context(), registration.NewSeries{Title: f.Title, MaxPerUser: limit})
	if err != nil {
		h.seriesFormFailed(w, r, f, err)
		return
	}
	http.Redirect(w, r.Request, Prefix+"/series/"+s.ID, http.StatusSeeOther)
}

// editSeriesPage is the form that changes a series' title and limit.
func (h *Handler) editSeriesPage(w http.ResponseWriter, r *request) {
	s, err := h.cfg.Services.Pools.GetSeries(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "series_form", seriesForm{ID: s.ID, Title: s.Title, MaxPerUser: strconv.Itoa(s.MaxPerUser)})
}

// updateSeries changes a series' title and limit: a lower limit removes
// nobody, it refuses the signups that follow.
func (h *Handler) updateSeries(w http.ResponseWriter, r *request) {
	f, limit := h.readSeriesForm(r)
	f.ID = r.PathValue("id")
	if f.Err.Message != "" {
		h.render(w, r, http.StatusUnprocessableEntity, "series_form", f)
		return
	}
	s, err := h.cfg.Services.Pools.UpdateSeries(r.Context(), f.ID, registration.SeriesPatch{Title: &f.Title, MaxPerUser: &limit})
	if err != nil {
		h.seriesFormFailed(w, r, f, err)
		return
	}
	http.Redirect(w, r.Request, Prefix+"/series/"+s.ID, http.StatusSeeOther)
}

// seriesView is the data of a series' page: its settings and a page of
// its activities.
type seriesView struct {
	Series     registration.Series
	Activities []registration.Activity
	Next       string
}

// seriesPage shows a series' settings and its activities, newest first.
func (h *Handler) seriesPage(w http.ResponseWriter, r *request) {
	ctx := r.Context()
	s, err := h.cfg.Services.Pools.GetSeries(ctx, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	before, err := poolsCursor(r, registration.ActivityCursor)
	if err != nil {
		h.poolsFail(w, r, err)
		return
	}
	page, err := h.cfg.Services.Pools.SeriesActivities(ctx, s.ID, before, poolsPageSize)
	if err != nil {
		h.poolsFail(w, r, err)
		return
	}
	data := seriesView{Series: s, Activities: page.Items}
	if page.NextCursor != nil {
		data.Next = *page.NextCursor
	}
	h.render(w, r, http.StatusOK, "series_view", data)
}
