package httpapi

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/httpapi/demo"
	"github.com/physiciansnet/capacityd/httpapi/widget"
	"github.com/physiciansnet/capacityd/registration"
)

// demoCSP is the Content-Security-Policy of the demo page: its own scripts,
// styles and API only, and the widgets' default look (the <style> elements
// the widget scripts add, by hash).
var demoCSP = "default-src 'none'; script-src 'self'; style-src 'self' " + strings.Join(widget.StyleHashes, " ") +
	"; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// assetTypes are the content types of the widget assets.
var assetTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
}

// demoNotePattern is the form of a note id.
var demoNotePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// registerWidgetRoutes adds the widget assets, the demo page and, when
// enabled, the demo signup endpoint.
func (s *Server) registerWidgetRoutes(e *echo.Echo) {
	e.GET("/widget/:file", s.widgetAsset)
	e.GET("/demo", s.demoPage)
	if s.cfg.DemoSignups {
		e.POST("/demo/signups", s.demoSignup, s.limitPublicWrites)
	}
}

// widgetAsset serves an embedded widget file (or the demo page's script
// or style), cacheable for five minutes and loadable from any origin.
func (s *Server) widgetAsset(c echo.Context) error {
	name := c.Param("file")
	ctype, ok := assetTypes[path.Ext(name)]
	if !ok || name != path.Base(name) {
		return capacityd.Errorf(capacityd.ENotFound, "no such widget file")
	}
	b, ok := widget.Script(name)
	if !ok {
		var err error
		if b, err = fs.ReadFile(demo.Assets, name); err != nil {
			return capacityd.Errorf(capacityd.ENotFound, "no such widget file")
		}
	}
	h := c.Response().Header()
	h.Set(echo.HeaderCacheControl, "public, max-age=300")
	h.Set(echo.HeaderXContentTypeOptions, "nosniff")
	h.Set("Cross-Origin-Resource-Policy", "cross-origin")
	return c.Blob(http.StatusOK, ctype, b)
}

// DemoNoteID is the note of the demo page when it names none. In the
// registered notes mode the service registers it at start (see
// app.App.RegisterDemoNote), so that the demo page works in every mode.
const DemoNoteID = "demo-note"

// demoPage serves the demo page for ?activity=, ?waitlist= (an activity
// with a waiting list), ?pool= (a pool, with the seat widgets of its
// activities) and ?note=. Ids of the wrong form are left out of the page.
// Without ?activity, ?waitlist and ?pool it shows the newest activity, if
// any; without ?note, the note demo-note. The embed snippets name the
// service by baseURL.
func (s *Server) demoPage(c echo.Context) error {
	data := demo.Data{Base: baseURL(c), Signups: s.cfg.DemoSignups, NoteID: DemoNoteID}
	q := c.QueryParams()
	if id := q.Get("activity"); idPattern.MatchString(id) && id[0] == 'a' {
		data.ActivityID = id
	}
	if id := q.Get("waitlist"); idPattern.MatchString(id) && id[0] == 'a' {
		data.WaitlistID = id
	}
	if id := q.Get("pool"); idPattern.MatchString(id) && id[0] == 'p' {
		if err := s.demoPool(c, id, &data); err != nil {
			return err
		}
	}
	if !q.Has("activity") && !q.Has("waitlist") && !q.Has("pool") {
		// Unreachable PostgreSQL only leaves the activity out.
		if p, err := s.regs.ListActivities(c.Request().Context(), "", 1); err == nil && len(p.Items) > 0 {
			data.ActivityID = p.Items[0].ID
		}
	}
	if q.Has("note") {
		data.NoteID = ""
		if n := q.Get("note"); demoNotePattern.MatchString(n) {
			data.NoteID = n
		}
	}
	var buf bytes.Buffer
	if err := demo.Page.Execute(&buf, data); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", demoCSP)
	h.Set(echo.HeaderXContentTypeOptions, "nosniff")
	h.Set(echo.HeaderXFrameOptions, "DENY")
	h.Set(echo.HeaderReferrerPolicy, "no-referrer")
	h.Set(echo.HeaderCacheControl, "no-store")
	return c.HTMLBlob(http.StatusOK, buf.Bytes())
}

// demoPool puts the pool id into data: its settings, read from PostgreSQL
// within the client's public-read limit (as a public pool read is), or
// MissingPool when it does not exist. An unreachable PostgreSQL only
// leaves it out.
func (s *Server) demoPool(c echo.Context, id string, data *demo.Data) error {
	if err := s.allowPublicRead(c); err != nil {
		return err
	}
	p, err := s.regs.GetPool(c.Request().Context(), id)
	switch {
	case err == nil:
		data.Pool = demo.NewPool(p.ID, p.Title, p.Capacity, p.Activities, s.cfg.DemoSignups)
	case capacityd.ErrorCode(err) == capacityd.ENotFound:
		data.MissingPool = id
	}
	return nil
}

// baseURL is the service's URL as the client reached it: the request's
// host, and https when the connection was TLS or a proxy on a private
// network said so (X-Forwarded-Proto and kin, as echo reads them).
func baseURL(c echo.Context) string {
	scheme := "http"
	if s := c.Scheme(); s == "https" || s == "wss" {
		scheme = "https"
	}
	return scheme + "://" + c.Request().Host
}

// demoSignup signs up a random user ("demo-" and 12 hex digits) for the
// activity of the body {"activity_id": "…", "seats": n}, seats as in a
// signup (absent: 1). It exists so that the demo page, which has no token,
// can show the counter move; it is off unless the DemoSignups setting
// turns it on.
func (s *Server) demoSignup(c echo.Context) error {
	var req struct {
		ActivityID string `json:"activity_id"`
		Seats      *int   `json:"seats"`
	}
	if err := decodeJSON(c, &req, false); err != nil {
		return err
	}
	if !idPattern.MatchString(req.ActivityID) || req.ActivityID[0] != 'a' {
		return registration.ActivityNotFound(safeForMessage(req.ActivityID))
	}
	seats, err := signupSeats(req.Seats)
	if err != nil {
		return err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	caller := registration.Caller{UserID: "demo-" + hex.EncodeToString(b), RequestID: c.Response().Header().Get(echo.HeaderXRequestID)}
	reg, _, err := s.regs.Signup(c.Request().Context(), registration.SignupInput{
		ActivityID: req.ActivityID, Caller: caller, Metadata: []byte(`{"demo":true}`), Seats: seats,
	})
	if err != nil {
		return err
	}
	return writeSignup(c, reg)
}
