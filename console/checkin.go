package console

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
)

// CheckinService is what the console asks of the doors: the check-in
// lists, their history, and the scans of the door pages.
type CheckinService interface {
	CreateList(ctx context.Context, in checkin.NewList) (checkin.List, error)
	GetList(ctx context.Context, id string, c registration.Caller) (checkin.List, error)
	Lists(ctx context.Context, activityID, before string, limit int) (checkin.ListPage, error)
	UpdateList(ctx context.Context, id string, p checkin.ListPatch) (checkin.List, error)
	DeleteList(ctx context.Context, id string) error
	Redeem(ctx context.Context, listID string, in checkin.RedeemInput, c registration.Caller) (checkin.Redeemed, error)
	Checkins(ctx context.Context, listID string, after int64, limit int, c registration.Caller) (checkin.CheckinPage, error)
}

// Page sizes of the check-in pages.
const (
	checkinListsPage   = 50
	checkinHistoryPage = 50
)

// checkinListID matches a check-in list's id (a cursor of the lists).
var checkinListID = regexp.MustCompile(`^cl_[0-9A-HJKMNP-TV-Z]{26}$`)

// checkinRoutes registers the check-in lists' pages and an activity's
// attendance, for admins.
func (h *Handler) checkinRoutes(r router) {
	r.page("GET "+Prefix+"/checkin-lists", adminOnly, h.checkinLists)
	r.page("POST "+Prefix+"/checkin-lists", adminOnly, h.createCheckinList)
	r.page("GET "+Prefix+"/checkin-lists/new", adminOnly, h.newCheckinList)
	r.page("GET "+Prefix+"/checkin-lists/{id}", adminOnly, h.checkinList)
	r.page("POST "+Prefix+"/checkin-lists/{id}", adminOnly, h.updateCheckinList)
	r.page("GET "+Prefix+"/checkin-lists/{id}/edit", adminOnly, h.editCheckinList)
	r.page("POST "+Prefix+"/checkin-lists/{id}/delete", adminOnly, h.deleteCheckinList)
	h.attendanceRoutes(r)
}

// checkinListsData is the data of the lists' page: one page of lists,
// newest first, of one activity's when Activity is set.
type checkinListsData struct {
	Activity string
	Lists    []checkin.List
	// Next is the cursor of the next page ("" on the last); Paged is true
	// past the first.
	Next    string
	Paged   bool
	Deleted bool
}

// checkinLists shows a page of the lists.
func (h *Handler) checkinLists(w http.ResponseWriter, r *request) {
	q := r.URL.Query()
	before := q.Get("before")
	if before != "" && !checkinListID.MatchString(before) {
		h.renderError(w, r, http.StatusBadRequest, "checkin.bad_cursor")
		return
	}
	data := checkinListsData{Activity: q.Get("activity"), Paged: before != "", Deleted: q.Get("deleted") != ""}
	page, err := h.cfg.Services.Checkins.Lists(r.Context(), data.Activity, before, checkinListsPage)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data.Lists = page.Items
	if page.NextCursor != nil {
		data.Next = *page.NextCursor
	}
	h.render(w, r, http.StatusOK, "checkin_lists", data)
}

// checkinListData is the data of a list's page: its settings and counts,
// and one page of its check-ins, newest first.
type checkinListData struct {
	List   checkin.List
	Stream string
	// Checkins are the check-ins of seq From to To, newest first.
	Checkins []historyRow
	From, To int64
	// Older is the To of the page of older check-ins (0: none); Newest
	// is false on a page of older ones.
	Older  int64
	Newest bool
	Saved  bool
}

// checkinList shows a list: its counts, live, and its history.
func (h *Handler) checkinList(w http.ResponseWriter, r *request) {
	ctx, c := r.Context(), caller(r.Request, r.grant)
	l, err := h.cfg.Services.Checkins.GetList(ctx, r.PathValue("id"), c)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	data := checkinListData{List: l, Stream: listStream(l.ID), Saved: r.URL.Query().Get("saved") != ""}
	// A list's check-ins are numbered 1, 2, 3, … without gaps: the page
	// that ends at seq To starts after To - checkinHistoryPage.
	data.To = l.LastSeq
	if v, err := strconv.ParseInt(r.URL.Query().Get("upto"), 10, 64); err == nil && v > 0 && v < l.LastSeq {
		data.To = v
	}
	data.Newest = data.To == l.LastSeq
	after := max(0, data.To-checkinHistoryPage)
	if data.To > 0 {
		page, err := h.cfg.Services.Checkins.Checkins(ctx, l.ID, after, int(data.To-after), c)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		for _, ci := range slices.Backward(page.Items) {
			data.Checkins = append(data.Checkins, historyRow{CheckIn: ci, ConflictCode: conflictCode(ci)})
		}
	}
	if len(data.Checkins) > 0 {
		data.From = data.Checkins[len(data.Checkins)-1].Seq
		data.To = data.Checkins[0].Seq
	}
	if data.From > 1 {
		data.Older = data.From - 1
	}
	h.render(w, r, http.StatusOK, "checkin_list", data)
}

// historyRow is a check-in as the history shows it: the rule a forced
// one broke as a code ("" for none).
type historyRow struct {
	checkin.CheckIn
	ConflictCode string
}

// conflictCode is the rule a check-in broke, "" for none.
func conflictCode(ci checkin.CheckIn) string {
	if ci.Conflict == nil {
		return ""
	}
	return *ci.Conflict
}

// listStream is the console's way to a list's stream of counts.
func listStream(id string) string { return Prefix + "/api/v1/checkin-lists/" + id + "/stream" }

// deleteCheckinList deletes a list and goes back to the lists.
func (h *Handler) deleteCheckinList(w http.ResponseWriter, r *request) {
	if err := h.cfg.Services.Checkins.DeleteList(r.Context(), r.PathValue("id")); err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r.Request, Prefix+"/checkin-lists?deleted=1", http.StatusSeeOther)
}
