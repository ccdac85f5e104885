package console

import (
	"strings"
	"time"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/checkin"
)

// doorData is the data of a door page: the list with its counts, the
// scan form (its Idempotency-Key, new at every page), the last scan's
// result (without scripts), and what the page's script starts from.
type doorData struct {
	List   checkin.List
	Stream string
	Key    string
	// Code and Type are the form's values; CodeError the key of the
	// message beside the code.
	Code      string
	Type      checkin.Type
	CodeError string
	Result    *doorResult
	// Activities are the list's activities, for the walk-in form.
	Activities []doorActivity
	// Config is what door.js reads (as JSON) from the page.
	Config doorConfig
}

// Types are the scan types the page offers.
func (doorData) Types() []checkin.Type { return []checkin.Type{checkin.TypeEntry, checkin.TypeExit} }

// doorActivity is an activity a list admits.
type doorActivity struct {
	ID    string
	Title string
}

// doorResult is what a scan did: entered, exited or refused.
type doorResult struct {
	Outcome string
	// Reason is the catalogue key of a refusal's words; Message the
	// domain's own, for a refusal those words do not cover.
	Reason   string
	Message  string
	Previous *capacityd.PreviousEntry
	// Inside and MaxInside are a room_full refusal's.
	Inside, MaxInside int
	// UserID, Seats and RegistrationID are an accepted scan's.
	UserID         string
	Seats          int
	RegistrationID string
	Replayed       bool
}

// doorReasons are the refusals the door page has its own words for.
var doorReasons = []string{capacityd.ETicketRevoked, capacityd.EWrongList, capacityd.ECheckinClosed, capacityd.EAlreadyCheckedIn,
	capacityd.ENotInside, capacityd.ERoomFull, capacityd.EInvalidTicket, capacityd.ENotFound, capacityd.EIdempotencyConflict}

// doorConfig is what door.js starts from: the list's rules and counts as
// the page was made (the script keeps them, and reads them again when it
// can), the routes it calls, and the page's words.
type doorConfig struct {
	List   doorList `json:"list"`
	API    string   `json:"api"`
	Search string   `json:"search"`
	Worker string   `json:"worker"`
	Scope  string   `json:"scope"`
	// Home is where the page goes once the device's copy is forgotten.
	Home string `json:"home"`
	// JSQR is the QR decoder the camera uses where the browser has no
	// BarcodeDetector.
	JSQR          string            `json:"jsqr"`
	JSQRIntegrity string            `json:"jsqr_integrity"`
	Words         map[string]string `json:"words"`
	// RenderedAt is when the page was made (Unix milliseconds): what the
	// device kept since is newer.
	RenderedAt int64 `json:"rendered_at"`
}

// doorList is a check-in list as the API shows it: what a device needs
// to decide a scan alone.
type doorList struct {
	ID          string        `json:"id"`
	Name        string        `json:"name"`
	ActivityIDs []string      `json:"activity_ids"`
	Entry       checkin.Entry `json:"entry"`
	MaxInside   *int          `json:"max_inside"`
	OpensAt     *time.Time    `json:"opens_at"`
	ClosesAt    *time.Time    `json:"closes_at"`
	CheckedIn   int           `json:"checked_in"`
	Inside      int           `json:"inside"`
	Conflicts   int           `json:"conflicts"`
}

// The vendored QR decoder (static/door/vendor/jsqr-1.4.0/README.md) and
// the integrity its script element carries.
const (
	doorJSQR          = "door/vendor/jsqr-1.4.0/jsQR.js"
	doorJSQRIntegrity = "sha384-b5Ya4Bq3qCyz39m2ISh+4DxjAIljdeFwK/BsXLuj9gugaNwAcj/ia15fxNZL9Nlx"
)

// doorWordPrefix starts the keys of the door's words (locales/*/door.json).
const doorWordPrefix = "door."

// doorConfig is the script's start for list l.
func (h *Handler) doorConfig(r *request, l checkin.List, acts []doorActivity) doorConfig {
	words := make(map[string]string)
	for k, v := range h.locales.messages[r.lang] {
		if strings.HasPrefix(k, doorWordPrefix) {
			words[strings.TrimPrefix(k, doorWordPrefix)] = v
		}
	}
	return doorConfig{
		List: doorList{ID: l.ID, Name: l.Name, ActivityIDs: l.ActivityIDs, Entry: l.Entry, MaxInside: l.MaxInside,
			OpensAt: l.OpensAt, ClosesAt: l.ClosesAt, CheckedIn: l.CheckedIn, Inside: l.Inside, Conflicts: l.Conflicts},
		API:           Prefix + "/api/v1",
		Search:        Prefix + "/doors/" + l.ID + "/search",
		Worker:        Prefix + "/doors/sw.js",
		Scope:         Prefix + "/doors/",
		Home:          Prefix + "/",
		JSQR:          doorStaticURL + doorJSQR,
		JSQRIntegrity: doorJSQRIntegrity,
		Words:         words,
		RenderedAt:    time.Now().UnixMilli(),
	}
}

// doorActivities are the list's activities with their titles (the id
// alone for one that cannot be read).
func (h *Handler) doorActivities(r *request, l checkin.List) []doorActivity {
	acts := make([]doorActivity, 0, len(l.ActivityIDs))
	for _, id := range l.ActivityIDs {
		a := doorActivity{ID: id, Title: id}
		if h.cfg.Services.Activities != nil {
			if got, err := h.cfg.Services.Activities.GetActivity(r.Context(), id); err == nil {
				a.Title = got.Title
			}
		}
		acts = append(acts, a)
	}
	return acts
}
