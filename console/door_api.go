package console

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// doorSearchLimit bounds the registrations a door's search shows per
// activity (a user holds at most one active registration of an activity;
// the others are cancelled or expired ones).
const doorSearchLimit = 10

// doorMatch is a registration a door's search found.
type doorMatch struct {
	RegistrationID string              `json:"registration_id"`
	ActivityID     string              `json:"activity_id"`
	UserID         string              `json:"user_id"`
	Seats          int                 `json:"seats"`
	Status         registration.Status `json:"status"`
	// Valid is true while it holds a seat (its ticket is good).
	Valid     bool `json:"valid"`
	CheckedIn bool `json:"checked_in"`
}

// doorSearch finds the registrations of a user (by exact user id) in the
// list's activities, as JSON, for someone at the door without a ticket:
// for an admin, or a door role of the list (the list's read refuses the
// others, as the API would).
func (h *Handler) doorSearch(w http.ResponseWriter, r *request) {
	ctx := r.Context()
	l, err := h.cfg.Services.Checkins.GetList(ctx, r.PathValue("list"), caller(r.Request, r.grant))
	if err != nil {
		doorJSONError(w, err)
		return
	}
	user := strings.TrimSpace(r.URL.Query().Get("user"))
	items := []doorMatch{}
	for _, act := range l.ActivityIDs {
		page, err := h.cfg.Services.Registrations.ActivityUserRegistrations(ctx, registration.ActivityUserFilter{
			ActivityID: act, UserID: user, Limit: doorSearchLimit})
		if err != nil {
			doorJSONError(w, err)
			return
		}
		for _, reg := range page.Items {
			items = append(items, doorMatch{RegistrationID: reg.ID, ActivityID: reg.ActivityID, UserID: reg.UserID,
				Seats: max(reg.Seats, 1), Status: reg.Status, Valid: reg.Status.Occupying(), CheckedIn: reg.CheckedIn})
		}
	}
	writeDoorJSON(w, http.StatusOK, map[string]any{"items": items})
}

// doorJSONError writes a domain error as the API would: its code and
// message, with the API's status for it.
func doorJSONError(w http.ResponseWriter, err error) {
	var ce *capacityd.Error
	if !errors.As(err, &ce) {
		ce = &capacityd.Error{Code: capacityd.EInternal, Message: "internal error"}
	}
	status := http.StatusInternalServerError
	switch ce.Code {
	case capacityd.EInvalid:
		status = http.StatusBadRequest
	case capacityd.ENotFound:
		status = http.StatusNotFound
	case capacityd.EForbidden:
		status = http.StatusForbidden
	case capacityd.EUnavailable:
		status = http.StatusServiceUnavailable
	}
	msg := ce.Message
	if status == http.StatusInternalServerError {
		msg = "internal error"
	}
	writeDoorJSON(w, status, map[string]any{"error": map[string]string{"code": ce.Code, "message": msg}})
}

// writeDoorJSON writes v as a JSON answer that no cache keeps.
func writeDoorJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// The door's service worker: static/door/sw.js, with the version of the
// console's static files and the list of the door's own files put in, so
// that a new build is a new worker (the browser installs it and drops the
// old cache).
const (
	doorWorkerFile        = "static/door/sw.js"
	doorWorkerVersion     = "__DOOR_VERSION__"
	doorWorkerAssets      = "__DOOR_ASSETS__"
	doorStaticURL         = Prefix + "/static/"
	doorStaticDir         = "static/door"
	doorWorkerCacheHeader = "no-cache"
)

var (
	doorWorkerOnce sync.Once
	doorWorkerBody []byte
	doorWorkerErr  error
)

// doorWorker serves the door's service worker.
func (h *Handler) doorWorker(w http.ResponseWriter, r *http.Request) {
	doorWorkerOnce.Do(func() { doorWorkerBody, doorWorkerErr = buildDoorWorker() })
	if doorWorkerErr != nil {
		h.cfg.Logger.Error("console door worker", "err", doorWorkerErr)
		http.Error(w, "the door's worker could not be built", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/javascript; charset=utf-8")
	hd.Set("Cache-Control", doorWorkerCacheHeader)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "default-src 'none'; connect-src 'self'")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(doorWorkerBody)
}

// buildDoorWorker is sw.js with its version (a hash of every static file)
// and the door's files (static/door/, but the worker and the notes) put
// in.
func buildDoorWorker() ([]byte, error) {
	src, err := fs.ReadFile(staticFiles, doorWorkerFile)
	if err != nil {
		return nil, err
	}
	sum := sha256.New()
	var assets []string
	err = fs.WalkDir(staticFiles, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(staticFiles, p)
		if err != nil {
			return err
		}
		sum.Write([]byte(p))
		sum.Write(b)
		ext := path.Ext(p)
		if strings.HasPrefix(p, doorStaticDir+"/") && p != doorWorkerFile && (ext == ".js" || ext == ".css") {
			assets = append(assets, doorStaticURL+strings.TrimPrefix(p, "static/"))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(assets)
	list, err := json.Marshal(assets)
	if err != nil {
		return nil, err
	}
	version := hex.EncodeToString(sum.Sum(nil))[:16]
	out := bytes.Replace(src, []byte(`"`+doorWorkerVersion+`"`), []byte(`"`+version+`"`), 1)
	out = bytes.Replace(out, []byte(`["`+doorWorkerAssets+`"]`), list, 1)
	return out, nil
}
