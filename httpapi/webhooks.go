package httpapi

import (
	"net/http"
	"net/url"
	"regexp"

	"github.com/labstack/echo/v4"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/webhook"
)

// registerWebhookRoutes adds the admin routes of webhooks.
func (s *Server) registerWebhookRoutes(g *echo.Group, admin []echo.MiddlewareFunc) {
	g.POST("/webhooks", s.createWebhook, admin...)
	g.GET("/webhooks", s.listWebhooks, admin...)
	g.GET("/webhooks/:id", s.getWebhook, admin...)
	g.DELETE("/webhooks/:id", s.deleteWebhook, admin...)
	g.GET("/webhooks/:id/deliveries", s.webhookDeliveries, admin...)
	g.GET("/webhooks/:id/deliveries/:event_id/attempts", s.deliveryAttempts, admin...)
}

type webhookRequest struct {
	URL        string   `json:"url"`
	Events     []string `json:"events"`
	ActivityID *string  `json:"activity_id"`
}

func (s *Server) createWebhook(c echo.Context) error {
	var req webhookRequest
	if err := decodeJSON(c, &req, false); err != nil {
		return err
	}
	w, err := s.cfg.Webhooks.Create(c.Request().Context(), webhook.NewWebhook(req))
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/webhooks/"+w.ID)
	return writeJSON(c, http.StatusCreated, w)
}

func (s *Server) listWebhooks(c echo.Context) error {
	ws, err := s.cfg.Webhooks.List(c.Request().Context())
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"items": ws})
}

func (s *Server) getWebhook(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	w, err := s.cfg.Webhooks.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, w)
}

func (s *Server) deleteWebhook(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	if err := s.cfg.Webhooks.Delete(c.Request().Context(), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) webhookDeliveries(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return capacityd.Errorf(capacityd.EInvalid, "malformed query string")
	}
	limit := 0
	if v, ok := q["limit"]; ok {
		if limit, err = intParam("limit", v[0], 1, webhook.MaxDeliveryList); err != nil {
			return err
		}
	}
	ds, err := s.cfg.Webhooks.Deliveries(c.Request().Context(), id, limit)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"items": ds})
}

func (s *Server) deliveryAttempts(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	eventID := c.Param("event_id")
	if safe := safeForMessage(eventID); safe != eventID {
		return webhook.NoDelivery(id, safe)
	}
	as, err := s.cfg.Webhooks.Attempts(c.Request().Context(), id, eventID)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"items": as})
}

// webhookIDPattern matches the ids of webhooks: "wh_" and a ULID.
var webhookIDPattern = regexp.MustCompile(`^wh_[0-9A-HJKMNP-TV-Z]{26}$`)

// webhookID returns the path's webhook id, or not_found when it does not
// have the form of one.
func webhookID(c echo.Context) (string, error) {
	id := c.Param("id")
	if !webhookIDPattern.MatchString(id) {
		return "", webhook.NotFound(safeForMessage(id))
	}
	return id, nil
}
