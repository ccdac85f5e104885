package console

import (
	"context"
	"net/http"
	"time"

	"github.com/physiciansnet/capacityd/onsale"
	"github.com/physiciansnet/capacityd/registration"
)

// OnSaleService is what the console asks of the admission queues
// (onsale.Queue) behind its on-sale pages.
type OnSaleService interface {
	LineStats(ctx context.Context, activityID string) (onsale.Line, bool, error)
}

// onsaleRoutes registers the on-sale pages: an activity's admission queue,
// and its numbers alone, which the page polls.
func (h *Handler) onsaleRoutes(r router) {
	r.page("GET "+Prefix+"/activities/{id}/onsale", adminOnly, h.onsalePage)
	r.page("GET "+Prefix+"/activities/{id}/onsale/numbers", adminOnly, h.onsaleNumbersPage)
}

// onsaleNumbers are an admission queue's numbers as its page shows them.
type onsaleNumbers struct {
	ActivityID string
	// Started is false until someone joins the line.
	Started bool
	// State is "none" (nobody joined yet), "before_opening" (the places
	// taken before opens_at await their random order), "open" or
	// "sold_out".
	State                              string
	Waiting, Admitted, TokensOut, Used int64
	Rate, MaxAdmitted                  int
	// Advanced is when the line was last advanced; Read when the page
	// read these numbers.
	Advanced, Read time.Time
}

// onsaleView is the data of an activity's on-sale page, or of its
// numbers alone (Fragment).
type onsaleView struct {
	Activity registration.Activity
	Seats    registration.Seats
	Numbers  onsaleNumbers
	Fragment bool
}

// onsaleNumbersOf reads the activity's line: from this instance's memory
// while it advances the line, else one read of the authority.
func (h *Handler) onsaleNumbersOf(ctx context.Context, activityID string) (onsaleNumbers, error) {
	line, ok, err := h.cfg.Services.OnSale.LineStats(ctx, activityID)
	if err != nil {
		return onsaleNumbers{}, err
	}
	n := onsaleNumbers{ActivityID: activityID, Started: ok, State: "none", Read: time.Now()}
	if !ok {
		return n, nil
	}
	n.Waiting, n.Admitted, n.TokensOut, n.Used = line.Waiting, line.AdmittedThrough, line.TokensOut, line.Used
	n.Rate, n.MaxAdmitted, n.Advanced = line.Settings.AdmitPerSecond, line.Settings.MaxAdmitted, line.AsOf
	switch {
	case line.SoldOut:
		n.State = "sold_out"
	case !line.Shuffled:
		n.State = "before_opening"
	default:
		n.State = "open"
	}
	return n, nil
}

// onsalePage shows an activity's opening times and admission queue
// settings, and the queue's numbers, which it refreshes by polling
// onsaleNumbersPage every 2 s (one small read each, at most).
func (h *Handler) onsalePage(w http.ResponseWriter, r *request) {
	ctx := r.Context()
	a, err := h.cfg.Services.Pools.GetActivity(ctx, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	n, err := h.onsaleNumbersOf(ctx, a.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data := onsaleView{Activity: a, Numbers: n}
	if s, err := h.cfg.Services.Seats(ctx, a.ID); err == nil {
		data.Seats = s
	}
	h.render(w, r, http.StatusOK, "onsale", data)
}

// onsaleNumbersPage is an admission queue's numbers alone.
func (h *Handler) onsaleNumbersPage(w http.ResponseWriter, r *request) {
	id := r.PathValue("id")
	if len(id) < 3 || id[:2] != "a_" {
		h.renderError(w, r, http.StatusNotFound, "error.not_found")
		return
	}
	n, err := h.onsaleNumbersOf(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "onsale", onsaleView{Numbers: n, Fragment: true})
}
