package console

import (
	"crypto/rand"
	"net/http"
	"strings"

	"github.com/physiciansnet/capacityd/registration"
)

// blockRoutes registers an activity's blocks pages.
func (h *Handler) blockRoutes(r router) {
	r.page("GET "+Prefix+"/activities/{id}/blocks", adminOnly, h.blocksPage)
	r.page("POST "+Prefix+"/activities/{id}/blocks", adminOnly, h.createBlock)
	r.page("POST "+Prefix+"/activities/{id}/blocks/{block}/delete", adminOnly, h.deleteBlock)
}

// blockRow is a block as its list shows it: never its code, which is
// shown once, when the block is created.
type blockRow struct {
	ID        string
	Seats     int
	Used      int
	Unused    int
	Role      string
	HasCode   bool
	ExpiresAt string
	Created   string
}

// blockForm is the form of a new block.
type blockForm struct {
	Seats     string
	Audience  string
	Code      string
	Role      string
	ExpiresAt string
	Err       poolsFormError
}

// blocksView is the data of an activity's blocks page, and of the page
// that shows a new block's code once (Created).
type blocksView struct {
	Activity registration.Activity
	Blocks   []blockRow
	Form     blockForm
	Created  *registration.Block
}

// blockRows are the blocks as the list shows them, dates in the
// organiser's time zone.
func blockRows(v view, blocks []registration.Block) []blockRow {
	rows := make([]blockRow, 0, len(blocks))
	for _, b := range blocks {
		row := blockRow{ID: b.ID, Seats: b.Seats, Used: b.Used, Unused: b.Unused(), HasCode: b.Code != nil,
			ExpiresAt: v.DatePtr(b.ExpiresAt), Created: v.Date(b.CreatedAt)}
		if b.Role != nil {
			row.Role = *b.Role
		}
		rows = append(rows, row)
	}
	return rows
}

// blocksOf reads the activity and its live blocks.
func (h *Handler) blocksOf(r *request, data *blocksView) error {
	ctx := r.Context()
	a, err := h.cfg.Services.Pools.GetActivity(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	blocks, err := h.cfg.Services.Pools.ListBlocks(ctx, a.ID)
	if err != nil {
		return err
	}
	data.Activity = a
	data.Blocks = blockRows(view{req: r, h: h}, blocks)
	return nil
}

// blocksPage lists an activity's live blocks, with the form of a new one.
func (h *Handler) blocksPage(w http.ResponseWriter, r *request) {
	data := blocksView{Form: blockForm{Audience: "code"}}
	if err := h.blocksOf(r, &data); err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "blocks", data)
}

// blockCode is a random code for a block whose form left it empty: ten
// characters of crypto/rand's base32 text, easy to read out and type.
func blockCode() string { return rand.Text()[:10] }

// createBlock holds seats for an audience. A code block's page is the
// answer itself, which shows the code this once (nothing keeps it to show
// after a redirect); a role block goes back to the list.
func (h *Handler) createBlock(w http.ResponseWriter, r *request) {
	f := blockForm{Seats: strings.TrimSpace(r.PostFormValue("seats")), Audience: r.PostFormValue("audience"),
		Code: strings.TrimSpace(r.PostFormValue("code")), Role: strings.TrimSpace(r.PostFormValue("role")),
		ExpiresAt: r.PostFormValue("expires_at")}
	seats, bad := h.poolsInt(r, "seats")
	expires, badTime := h.poolsTime(r, "expires_at")
	in := registration.NewBlock{Seats: seats, ExpiresAt: expires}
	switch f.Audience {
	case "role":
		in.Role = f.Role
	default:
		f.Audience, in.Code = "code", f.Code
		if in.Code == "" {
			in.Code = blockCode()
		}
	}
	data := blocksView{Form: f}
	if bad.Message != "" || badTime.Message != "" {
		data.Form.Err = bad
		if badTime.Message != "" {
			data.Form.Err = badTime
		}
		h.blockFormFailed(w, r, data, nil)
		return
	}
	b, err := h.cfg.Services.Pools.CreateBlock(r.Context(), r.PathValue("id"), in, caller(r.Request, r.grant))
	if err != nil {
		h.blockFormFailed(w, r, data, err)
		return
	}
	if b.Code == nil {
		http.Redirect(w, r.Request, Prefix+"/activities/"+b.ActivityID+"/blocks", http.StatusSeeOther)
		return
	}
	data = blocksView{Created: &b, Form: blockForm{Audience: "code"}}
	if err := h.blocksOf(r, &data); err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusCreated, "blocks", data)
}

// blockFormFailed shows the blocks page again with the form's problem:
// err's (the domain's refusal) when set, else the one already in data.
func (h *Handler) blockFormFailed(w http.ResponseWriter, r *request, data blocksView, err error) {
	if err != nil {
		problem, ok := poolsRefusal(err, "seats", "code", "role", "expires_at")
		if !ok {
			h.fail(w, r, err)
			return
		}
		data.Form.Err = problem
	}
	if err := h.blocksOf(r, &data); err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusUnprocessableEntity, "blocks", data)
}

// deleteBlock ends one of the activity's blocks: its unused seats return
// to the public at once.
func (h *Handler) deleteBlock(w http.ResponseWriter, r *request) {
	ctx := r.Context()
	activityID, id := r.PathValue("id"), r.PathValue("block")
	blocks, err := h.cfg.Services.Pools.ListBlocks(ctx, activityID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	found := false
	for _, b := range blocks {
		found = found || b.ID == id
	}
	if !found {
		h.fail(w, r, registration.BlockNotFound(id))
		return
	}
	if err := h.cfg.Services.Pools.DeleteBlock(ctx, id, caller(r.Request, r.grant)); err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r.Request, Prefix+"/activities/"+activityID+"/blocks", http.StatusSeeOther)
}
