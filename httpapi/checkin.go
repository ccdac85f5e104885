package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
)

// CheckinService is what the edge asks of the doors.
type CheckinService interface {
	Ticket(ctx context.Context, registrationID string, c registration.Caller) (checkin.Ticket, error)
	Keyset(ctx context.Context) (checkin.JWKSet, error)
	CreateList(ctx context.Context, in checkin.NewList) (checkin.List, error)
	GetList(ctx context.Context, id string, c registration.Caller) (checkin.List, error)
	Lists(ctx context.Context, activityID, before string, limit int) (checkin.ListPage, error)
	UpdateList(ctx context.Context, id string, p checkin.ListPatch) (checkin.List, error)
	DeleteList(ctx context.Context, id string) error
	Redeem(ctx context.Context, listID string, in checkin.RedeemInput, c registration.Caller) (checkin.Redeemed, error)
	Checkins(ctx context.Context, listID string, after int64, limit int, c registration.Caller) (checkin.CheckinPage, error)
	Tickets(ctx context.Context, listID, cursor string, limit int, wait time.Duration, c registration.Caller) (checkin.SyncPage, error)
	WalkIn(ctx context.Context, listID string, in checkin.WalkInInput, c registration.Caller) (checkin.Answer, error)
}

// registerCheckinRoutes mounts the tickets and the doors.
func (s *Server) registerCheckinRoutes(v1 *echo.Group, admin []echo.MiddlewareFunc) {
	user := s.authenticate
	v1.GET("/registrations/:id/ticket", s.getTicket, user)
	v1.GET("/registrations/:id/ticket.svg", s.getTicketSVG, user)
	v1.GET("/checkin/keys", s.checkinKeys)
	s.lists = newListFollowers(s.cfg.Checkins, s.cfg.ListChanges)
	v1.POST("/checkin-lists", s.createCheckinList, admin...)
	v1.GET("/checkin-lists", s.listCheckinLists, admin...)
	v1.GET("/checkin-lists/:id", s.getCheckinList, user)
	v1.PATCH("/checkin-lists/:id", s.patchCheckinList, admin...)
	v1.DELETE("/checkin-lists/:id", s.deleteCheckinList, admin...)
	v1.POST("/checkin-lists/:id/redeem", s.redeem, user)
	v1.GET("/checkin-lists/:id/checkins", s.checkinHistory, user, compressed)
	v1.GET("/checkin-lists/:id/tickets", s.ticketSync, user, compressed)
	v1.GET("/checkin-lists/:id/stream", s.checkinStream, user)
	v1.POST("/checkin-lists/:id/walk-ins", s.walkIn, user)
}

// compressed gzips an answer of at least a kilobyte for a client that
// accepts it: the feeds a door downloads before it can work offline.
var compressed = middleware.GzipWithConfig(middleware.GzipConfig{MinLength: 1024})

// listIDPattern matches a check-in list's id.
var listIDPattern = regexp.MustCompile(`^cl_[0-9A-HJKMNP-TV-Z]{26}$`)

func listID(c echo.Context) (string, error) {
	id := c.Param("id")
	if !listIDPattern.MatchString(id) {
		return "", checkin.ListNotFound(safeForMessage(id))
	}
	return id, nil
}

func (s *Server) getTicket(c echo.Context) error {
	id, err := registrationID(c)
	if err != nil {
		return err
	}
	t, err := s.cfg.Checkins.Ticket(c.Request().Context(), id, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, t)
}

func (s *Server) getTicketSVG(c echo.Context) error {
	id, err := registrationID(c)
	if err != nil {
		return err
	}
	t, err := s.cfg.Checkins.Ticket(c.Request().Context(), id, callerOf(c))
	if err != nil {
		return err
	}
	svg, err := checkin.QRCodeSVG(t.Ticket)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "private, no-store")
	return c.Blob(http.StatusOK, "image/svg+xml", svg)
}

func (s *Server) checkinKeys(c echo.Context) error {
	set, err := s.cfg.Checkins.Keyset(c.Request().Context())
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
	return writeJSON(c, http.StatusOK, set)
}

// listBody is the body of a list's creation or patch.
type listBody struct {
	Name        *string         `json:"name"`
	ActivityIDs *[]string       `json:"activity_ids"`
	Entry       *checkin.Entry  `json:"entry"`
	MaxInside   json.RawMessage `json:"max_inside"`
	OpensAt     json.RawMessage `json:"opens_at"`
	ClosesAt    json.RawMessage `json:"closes_at"`
	DoorRoles   *[]string       `json:"door_roles"`
}

// patch returns the body as a patch (absent fields: unchanged; null:
// removed).
func (b listBody) patch() (checkin.ListPatch, error) {
	p := checkin.ListPatch{Name: b.Name, ActivityIDs: b.ActivityIDs, Entry: b.Entry, DoorRoles: b.DoorRoles}
	maxInside, err := nullableField[int](b.MaxInside, "max_inside", "an integer")
	if err != nil {
		return p, err
	}
	opens, err := nullableField[time.Time](b.OpensAt, "opens_at", "a time (RFC 3339)")
	if err != nil {
		return p, err
	}
	closes, err := nullableField[time.Time](b.ClosesAt, "closes_at", "a time (RFC 3339)")
	if err != nil {
		return p, err
	}
	p.MaxInside, p.OpensAt, p.ClosesAt = registration.OptionalOf(maxInside), registration.OptionalOf(opens), registration.OptionalOf(closes)
	return p, nil
}

func (s *Server) createCheckinList(c echo.Context) error {
	var b listBody
	if err := decodeJSON(c, &b, false); err != nil {
		return err
	}
	p, err := b.patch()
	if err != nil {
		return err
	}
	in := checkin.NewList{MaxInside: p.MaxInside.Value, OpensAt: p.OpensAt.Value, ClosesAt: p.ClosesAt.Value}
	if b.Name == nil || b.ActivityIDs == nil {
		return capacityd.Errorf(capacityd.EInvalid, "name and activity_ids are required")
	}
	in.Name, in.ActivityIDs = *b.Name, *b.ActivityIDs
	if b.Entry != nil {
		in.Entry = *b.Entry
	}
	if b.DoorRoles != nil {
		in.DoorRoles = *b.DoorRoles
	}
	l, err := s.cfg.Checkins.CreateList(c.Request().Context(), in)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/checkin-lists/"+l.ID)
	return writeJSON(c, http.StatusCreated, l)
}

func (s *Server) listCheckinLists(c echo.Context) error {
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	limit := checkin.DefaultListLimit
	if v, ok := q["limit"]; ok {
		if limit, err = intParam("limit", v[0], 1, checkin.MaxListLimit); err != nil {
			return err
		}
	}
	before := q.Get("cursor")
	if _, ok := q["cursor"]; ok && !listIDPattern.MatchString(before) {
		return capacityd.Errorf(capacityd.EInvalid, "cursor is malformed: use a next_cursor the listing gave")
	}
	page, err := s.cfg.Checkins.Lists(c.Request().Context(), q.Get("activity_id"), before, limit)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, page)
}

func (s *Server) getCheckinList(c echo.Context) error {
	id, err := listID(c)
	if err != nil {
		return err
	}
	l, err := s.cfg.Checkins.GetList(c.Request().Context(), id, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, l)
}

func (s *Server) patchCheckinList(c echo.Context) error {
	id, err := listID(c)
	if err != nil {
		return err
	}
	var b listBody
	if err := decodeJSON(c, &b, false); err != nil {
		return err
	}
	p, err := b.patch()
	if err != nil {
		return err
	}
	if p.Empty() {
		return capacityd.Errorf(capacityd.EInvalid, "a patch must change at least one field")
	}
	l, err := s.cfg.Checkins.UpdateList(c.Request().Context(), id, p)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, l)
}

func (s *Server) deleteCheckinList(c echo.Context) error {
	id, err := listID(c)
	if err != nil {
		return err
	}
	if err := s.cfg.Checkins.DeleteList(c.Request().Context(), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// redeemBody is a scan.
type redeemBody struct {
	Ticket         *string       `json:"ticket"`
	RegistrationID *string       `json:"registration_id"`
	Type           *checkin.Type `json:"type"`
	Device         *string       `json:"device"`
	Force          *bool         `json:"force"`
	At             *time.Time    `json:"at"`
}

func (s *Server) redeem(c echo.Context) error {
	id, err := listID(c)
	if err != nil {
		return err
	}
	var b redeemBody
	if err := decodeJSON(c, &b, false); err != nil {
		return err
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	in := checkin.RedeemInput{At: b.At, IdempotencyKey: key}
	if b.Device == nil {
		return capacityd.Errorf(capacityd.EInvalid, "device is required")
	}
	in.Device = *b.Device
	if b.Ticket != nil {
		if *b.Ticket == "" {
			return checkin.InvalidTicket("it is empty")
		}
		in.Ticket = *b.Ticket
	}
	if b.RegistrationID != nil {
		in.RegistrationID = *b.RegistrationID
	}
	if b.Type != nil {
		in.Type = *b.Type
	}
	if b.Force != nil {
		in.Force = *b.Force
	}
	out, err := s.cfg.Checkins.Redeem(c.Request().Context(), id, in, callerOf(c))
	if err != nil {
		return err
	}
	if out.Replayed {
		c.Response().Header().Set(headerReplayed, "true")
	}
	return writeJSON(c, http.StatusOK, out.Answer())
}

func (s *Server) checkinHistory(c echo.Context) error {
	id, err := listID(c)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	var after int64
	if v, ok := q["after"]; ok {
		if after, err = strconv.ParseInt(v[0], 10, 64); err != nil || after < 0 {
			return capacityd.Errorf(capacityd.EInvalid, "after must be a check-in seq of 0 or more")
		}
	}
	limit := checkin.DefaultListLimit
	if v, ok := q["limit"]; ok {
		if limit, err = intParam("limit", v[0], 1, checkin.MaxListLimit); err != nil {
			return err
		}
	}
	page, err := s.cfg.Checkins.Checkins(c.Request().Context(), id, after, limit, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, page)
}

// maxSyncWait bounds a quiet long poll of the ticket sync feed.
const maxSyncWait = 30

func (s *Server) ticketSync(c echo.Context) error {
	id, err := listID(c)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	limit := checkin.DefaultSyncLimit
	if v, ok := q["limit"]; ok {
		if limit, err = intParam("limit", v[0], 1, checkin.MaxSyncLimit); err != nil {
			return err
		}
	}
	var wait time.Duration
	if v, ok := q["wait"]; ok {
		secs, err := intParam("wait", v[0], 0, maxSyncWait)
		if err != nil {
			return err
		}
		wait = time.Duration(secs) * time.Second
	}
	cursor := q.Get("cursor")
	if _, ok := q["cursor"]; ok && cursor == "" {
		return capacityd.Errorf(capacityd.EInvalid, "cursor is malformed: use a next_cursor the feed gave")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), wait+s.cfg.RequestTimeout)
	defer cancel()
	_ = http.NewResponseController(c.Response()).SetWriteDeadline(time.Now().Add(wait + s.cfg.RequestTimeout))
	page, err := s.cfg.Checkins.Tickets(ctx, id, cursor, limit, wait, callerOf(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, page)
}

// walkInBody is a walk-in's request.
type walkInBody struct {
	ActivityID *string `json:"activity_id"`
	UserID     *string `json:"user_id"`
	Seats      *int    `json:"seats"`
	Device     *string `json:"device"`
}

func (s *Server) walkIn(c echo.Context) error {
	id, err := listID(c)
	if err != nil {
		return err
	}
	var b walkInBody
	if err := decodeJSON(c, &b, false); err != nil {
		return err
	}
	if b.ActivityID == nil || b.UserID == nil {
		return capacityd.Errorf(capacityd.EInvalid, "activity_id and user_id are required")
	}
	in := checkin.WalkInInput{ActivityID: *b.ActivityID, UserID: *b.UserID}
	if b.Seats != nil {
		if *b.Seats < 1 {
			return capacityd.Errorf(capacityd.EInvalid, "seats must be between 1 and the activity's max_seats_per_registration")
		}
		in.Seats = *b.Seats
	}
	if b.Device != nil {
		if *b.Device == "" {
			return capacityd.Errorf(capacityd.EInvalid, "device must be 1 to %d printable characters", checkin.MaxDeviceLen)
		}
		in.Device = *b.Device
	}
	a, err := s.cfg.Checkins.WalkIn(c.Request().Context(), id, in, callerOf(c))
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if a.CheckIn == nil {
		status = http.StatusAccepted
	}
	return writeJSON(c, status, a)
}
