package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd/registration"
)

// PoolService is what the console asks of the service behind its pools,
// series and blocks pages (registration.Service).
type PoolService interface {
	CreatePool(ctx context.Context, in registration.NewPool) (registration.Pool, error)
	GetPool(ctx context.Context, id string) (registration.Pool, error)
	ListPools(ctx context.Context, before string, limit int) (registration.PoolPage, error)
	UpdatePool(ctx context.Context, id string, p registration.PoolPatch, c registration.Caller) (registration.Pool, error)

	CreateSeries(ctx context.Context, in registration.NewSeries) (registration.Series, error)
	GetSeries(ctx context.Context, id string) (registration.Series, error)
	ListSeries(ctx context.Context, before string, limit int) (registration.SeriesPage, error)
	UpdateSeries(ctx context.Context, id string, p registration.SeriesPatch) (registration.Series, error)
	SeriesActivities(ctx context.Context, seriesID, before string, limit int) (registration.ActivityPage, error)

	GetActivity(ctx context.Context, id string) (registration.Activity, error)
	CreateBlock(ctx context.Context, activityID string, in registration.NewBlock, c registration.Caller) (registration.Block, error)
	ListBlocks(ctx context.Context, activityID string) ([]registration.Block, error)
	DeleteBlock(ctx context.Context, id string, c registration.Caller) error
}

// poolLiveMembers is how many of a pool's activities its page follows
// live (one seat stream each): a browser opens at most six connections
// to a server of HTTP/1.1, and the page's own requests need some.
const poolLiveMembers = 4

// poolMembersShown is how many of a pool's activities its page names.
const poolMembersShown = 50

// poolRoutes registers the pools, series and blocks pages.
func (h *Handler) poolRoutes(r router) {
	r.page("GET "+Prefix+"/pools", adminOnly, h.poolsPage)
	r.page("GET "+Prefix+"/pools/new", adminOnly, h.newPoolPage)
	r.page("POST "+Prefix+"/pools", adminOnly, h.createPool)
	r.page("GET "+Prefix+"/pools/{id}", adminOnly, h.poolPage)
	r.page("GET "+Prefix+"/pools/{id}/seats", adminOnly, h.poolSeatsPage)
	r.page("GET "+Prefix+"/pools/{id}/edit", adminOnly, h.editPoolPage)
	r.page("POST "+Prefix+"/pools/{id}", adminOnly, h.updatePool)
	h.seriesRoutes(r)
	h.blockRoutes(r)
}

// poolsList is the data of the list of pools.
type poolsList struct {
	Items []registration.Pool
	Next  string
}

// poolsPage lists the pools, newest first, a keyset page at a time.
func (h *Handler) poolsPage(w http.ResponseWriter, r *request) {
	before, err := poolsCursor(r, registration.PoolCursor)
	if err != nil {
		h.poolsFail(w, r, err)
		return
	}
	page, err := h.cfg.Services.Pools.ListPools(r.Context(), before, poolsPageSize)
	if err != nil {
		h.poolsFail(w, r, err)
		return
	}
	data := poolsList{Items: page.Items}
	if page.NextCursor != nil {
		data.Next = *page.NextCursor
	}
	h.render(w, r, http.StatusOK, "pools", data)
}

// poolForm is the data of the form that creates or edits a pool.
type poolForm struct {
	// ID is the pool's when editing, empty when creating.
	ID       string
	Title    string
	Capacity string
	Err      poolsFormError
}

// newPoolPage is the form of a new pool.
func (h *Handler) newPoolPage(w http.ResponseWriter, r *request) {
	h.render(w, r, http.StatusOK, "pool_form", poolForm{})
}

// readPoolForm reads the form's values, and a capacity that is not a
// whole number as its problem.
func (h *Handler) readPoolForm(r *request) (poolForm, int) {
	f := poolForm{Title: strings.TrimSpace(r.PostFormValue("title")), Capacity: strings.TrimSpace(r.PostFormValue("capacity"))}
	n, bad := h.poolsInt(r, "capacity")
	f.Err = bad
	return f, n
}

// createPool creates a pool and shows it.
func (h *Handler) createPool(w http.ResponseWriter, r *request) {
	f, capacity := h.readPoolForm(r)
	if f.Err.Message != "" {
		h.render(w, r, http.StatusUnprocessableEntity, "pool_form", f)
		return
	}
	p, err := h.cfg.Services.Pools.CreatePool(r.Context(), registration.NewPool{Title: f.Title, Capacity: capacity})
	if err != nil {
		h.poolFormFailed(w, r, f, err)
		return
	}
	http.Redirect(w, r.Request, Prefix+"/pools/"+p.ID, http.StatusSeeOther)
}

// poolFormFailed shows the form again with the domain's refusal.
func (h *Handler) poolFormFailed(w http.ResponseWriter, r *request, f poolForm, err error) {
	problem, ok := poolsRefusal(err, "title", "capacity")
	if !ok {
		h.fail(w, r, err)
		return
	}
	f.Err = problem
	h.render(w, r, http.StatusUnprocessableEntity, "pool_form", f)
}

// editPoolPage is the form that changes a pool's title and capacity.
func (h *Handler) editPoolPage(w http.ResponseWriter, r *request) {
	p, err := h.cfg.Services.Pools.GetPool(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "pool_form", poolForm{ID: p.ID, Title: p.Title, Capacity: strconv.Itoa(p.Capacity)})
}

// updatePool changes a pool's title and capacity, as the API's PATCH does
// (in a change transaction: a raise admits waiting users at once).
func (h *Handler) updatePool(w http.ResponseWriter, r *request) {
	f, capacity := h.readPoolForm(r)
	f.ID = r.PathValue("id")
	if f.Err.Message != "" {
		h.render(w, r, http.StatusUnprocessableEntity, "pool_form", f)
		return
	}
	p, err := h.cfg.Services.Pools.UpdatePool(r.Context(), f.ID, registration.PoolPatch{Title: &f.Title, Capacity: &capacity}, caller(r.Request, r.grant))
	if err != nil {
		h.poolFormFailed(w, r, f, err)
		return
	}
	http.Redirect(w, r.Request, Prefix+"/pools/"+p.ID, http.StatusSeeOther)
}

// poolSeats are a pool's numbers as the display tier shows them.
type poolSeats struct {
	PoolID                               string
	Capacity, Taken, Reserved, Remaining int
	AsOf                                 time.Time
}

// poolMember is an activity of a pool, with its seats from the display
// tier; Live when its page follows its seat stream.
type poolMember struct {
	ID    string
	Title string
	Seats registration.Seats
	Live  bool
}

// poolDashboard is the data of a pool's page.
type poolDashboard struct {
	Pool    registration.Pool
	Seats   poolSeats
	Members []poolMember
	// More counts the activities not shown.
	More int
	// Fragment is set for the numbers alone, which the page polls.
	Fragment bool
}

// readPoolSeats reads a pool's numbers from the display tier.
func (h *Handler) readPoolSeats(ctx context.Context, id string) (poolSeats, []string, error) {
	st, _, err := h.cfg.Services.PoolSeats(ctx, id)
	if err != nil {
		return poolSeats{}, nil, err
	}
	return poolSeats{PoolID: id, Capacity: st.Capacity, Taken: st.Taken, Reserved: st.Reserved, Remaining: st.Remaining(),
		AsOf: time.Now()}, st.Activities, nil
}

// poolPage is a pool's dashboard: its numbers from the display tier,
// refreshed by polling poolSeatsPage (the API has no pool stream), and
// each of its activities' seats, followed live on their public seat
// streams.
func (h *Handler) poolPage(w http.ResponseWriter, r *request) {
	ctx := r.Context()
	p, err := h.cfg.Services.Pools.GetPool(ctx, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	seats, _, err := h.readPoolSeats(ctx, p.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data := poolDashboard{Pool: p, Seats: seats}
	for i, id := range p.Activities {
		if i == poolMembersShown {
			data.More = len(p.Activities) - i
			break
		}
		m := poolMember{ID: id, Title: id, Live: i < poolLiveMembers}
		if a, err := h.cfg.Services.Pools.GetActivity(ctx, id); err == nil {
			m.Title = a.Title
		}
		if s, err := h.cfg.Services.Seats(ctx, id); err == nil {
			m.Seats = s
		}
		data.Members = append(data.Members, m)
	}
	h.render(w, r, http.StatusOK, "pool", data)
}

// poolSeatsPage is a pool's numbers alone, from the display tier (one
// small read): its page polls it every few seconds.
func (h *Handler) poolSeatsPage(w http.ResponseWriter, r *request) {
	id := r.PathValue("id")
	if !registration.IsPoolID(id) {
		h.renderError(w, r, http.StatusNotFound, "error.not_found")
		return
	}
	seats, _, err := h.readPoolSeats(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "pool", poolDashboard{Pool: registration.Pool{ID: id}, Seats: seats, Fragment: true})
}
