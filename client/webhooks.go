package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// CreateWebhook registers a webhook (admin). The answer's Secret is the
// only time the signing secret is shown.
func (c *Client) CreateWebhook(ctx context.Context, in NewWebhook) (Webhook, error) {
	var w Webhook
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/webhooks", body: in, ok: []int{http.StatusCreated}}, &w)
	return w, err
}

// ListWebhooks returns every webhook, without secrets (admin).
func (c *Client) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	var list struct {
		Items []Webhook `json:"items"`
	}
	return list.Items, c.get(ctx, "/v1/webhooks", nil, &list)
}

// GetWebhook returns a webhook, without its secret (admin).
func (c *Client) GetWebhook(ctx context.Context, id string) (Webhook, error) {
	var w Webhook
	return w, c.get(ctx, "/v1/webhooks/"+seg(id), nil, &w)
}

// DeleteWebhook deletes a webhook (admin).
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, _, err := c.call(ctx, request{method: http.MethodDelete, path: "/v1/webhooks/" + seg(id), ok: []int{http.StatusNoContent}}, nil)
	return err
}

// Deliveries returns a webhook's recent deliveries, at most limit (0: the
// service's default) (admin).
func (c *Client) Deliveries(ctx context.Context, webhookID string, limit int) ([]Delivery, error) {
	var q url.Values
	if limit > 0 {
		q = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	var list struct {
		Items []Delivery `json:"items"`
	}
	return list.Items, c.get(ctx, "/v1/webhooks/"+seg(webhookID)+"/deliveries", q, &list)
}

// DeliveryAttempts returns every recorded attempt of an event's delivery
// to a webhook, in attempt order (admin): empty before the first is
// recorded; a not_found *Error when the webhook does not exist or the event
// has no delivery to it.
func (c *Client) DeliveryAttempts(ctx context.Context, webhookID, eventID string) ([]DeliveryAttempt, error) {
	var list struct {
		Items []DeliveryAttempt `json:"items"`
	}
	return list.Items, c.get(ctx, "/v1/webhooks/"+seg(webhookID)+"/deliveries/"+seg(eventID)+"/attempts", nil, &list)
}
