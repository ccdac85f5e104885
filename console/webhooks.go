package console

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/webhook"
)

// WebhookService is what the console asks of the service behind its
// webhooks pages (webhook.Service).
type WebhookService interface {
	Create(ctx context.Context, in webhook.NewWebhook) (webhook.Created, error)
	List(ctx context.Context) ([]webhook.Webhook, error)
	Get(ctx context.Context, id string) (webhook.Webhook, error)
	Delete(ctx context.Context, id string) error
	Deliveries(ctx context.Context, id string, limit int) ([]webhook.Delivery, error)
	Attempts(ctx context.Context, id, eventID string) ([]webhook.DeliveryAttempt, error)
}

// webhookDeliveriesShown is how many of a webhook's latest deliveries its
// page shows.
const webhookDeliveriesShown = 100

// webhookRoutes registers the webhooks pages.
func (h *Handler) webhookRoutes(r router) {
	r.page("GET "+Prefix+"/webhooks", adminOnly, h.webhooksPage)
	r.page("GET "+Prefix+"/webhooks/new", adminOnly, h.newWebhookPage)
	r.page("POST "+Prefix+"/webhooks", adminOnly, h.createWebhook)
	r.page("GET "+Prefix+"/webhooks/{id}", adminOnly, h.webhookPage)
	r.page("POST "+Prefix+"/webhooks/{id}/delete", adminOnly, h.deleteWebhook)
	r.page("GET "+Prefix+"/webhooks/{id}/deliveries/{event}", adminOnly, h.webhookDeliveryPage)
}

// webhookList is the data of the list of webhooks.
type webhookList struct {
	Items []webhook.Webhook
}

// webhooksPage lists every webhook (the service keeps no pages of them:
// an installation has a handful), without secrets.
func (h *Handler) webhooksPage(w http.ResponseWriter, r *request) {
	items, err := h.cfg.Services.Webhooks.List(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "webhooks", webhookList{Items: items})
}

// webhookForm is the form of a new webhook, and the page that shows its
// secret once (Created).
type webhookForm struct {
	URL        string
	All        bool
	Events     []string
	ActivityID string
	Err        poolsFormError
	Created    *webhook.Created
}

// EventTypes are the event types a webhook may subscribe to.
func (webhookForm) EventTypes() []registration.EventType { return registration.EventTypes }

// Has reports whether the form subscribes to the event type t.
func (f webhookForm) Has(t registration.EventType) bool { return slices.Contains(f.Events, string(t)) }

// newWebhookPage is the form of a new webhook.
func (h *Handler) newWebhookPage(w http.ResponseWriter, r *request) {
	h.render(w, r, http.StatusOK, "webhook_form", webhookForm{All: true})
}

// createWebhook registers a webhook. The answer is its page with the
// signing secret, the one place it is ever shown (nothing keeps it to show
// after a redirect).
func (h *Handler) createWebhook(w http.ResponseWriter, r *request) {
	if err := r.ParseForm(); err != nil {
		h.renderError(w, r, http.StatusBadRequest, "pools.bad_request")
		return
	}
	f := webhookForm{URL: strings.TrimSpace(r.PostFormValue("url")), ActivityID: strings.TrimSpace(r.PostFormValue("activity_id"))}
	for _, e := range r.PostForm["events"] {
		if e == webhook.AllEvents {
			f.All = true
			continue
		}
		f.Events = append(f.Events, e)
	}
	in := webhook.NewWebhook{URL: f.URL, Events: f.Events}
	if f.All {
		in.Events = []string{webhook.AllEvents}
	}
	if f.ActivityID != "" {
		in.ActivityID = &f.ActivityID
	}
	created, err := h.cfg.Services.Webhooks.Create(r.Context(), in)
	if err != nil {
		problem, ok := poolsRefusal(err, "url", "events", "activity_id")
		if !ok && poolsNotFound(err) && in.ActivityID != nil {
			// An activity id that names nothing is the form's to show.
			_, msg := errorMessage(err)
			problem, ok = poolsFormError{Field: "activity_id", Message: msg}, msg != ""
		}
		if !ok {
			h.fail(w, r, err)
			return
		}
		f.Err = problem
		h.render(w, r, http.StatusUnprocessableEntity, "webhook_form", f)
		return
	}
	h.render(w, r, http.StatusCreated, "webhook_form", webhookForm{Created: &created})
}

// webhookView is the data of a webhook's page: the webhook and its latest
// deliveries.
type webhookView struct {
	Webhook    webhook.Webhook
	Deliveries []webhook.Delivery
}

// webhookPage shows a webhook and its latest deliveries, newest first.
func (h *Handler) webhookPage(w http.ResponseWriter, r *request) {
	ctx := r.Context()
	wh, err := h.cfg.Services.Webhooks.Get(ctx, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ds, err := h.cfg.Services.Webhooks.Deliveries(ctx, wh.ID, webhookDeliveriesShown)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "webhook", webhookView{Webhook: wh, Deliveries: ds})
}

// deleteWebhook deletes a webhook: nothing more is delivered to it.
func (h *Handler) deleteWebhook(w http.ResponseWriter, r *request) {
	if err := h.cfg.Services.Webhooks.Delete(r.Context(), r.PathValue("id")); err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r.Request, Prefix+"/webhooks", http.StatusSeeOther)
}

// webhookDelivery is the data of a delivery's page: its attempts.
type webhookDelivery struct {
	Webhook  webhook.Webhook
	EventID  string
	Attempts []webhook.DeliveryAttempt
}

// webhookDeliveryPage shows every attempt of one event's delivery to a
// webhook: when, the receiver's status or why there was none, how long.
func (h *Handler) webhookDeliveryPage(w http.ResponseWriter, r *request) {
	ctx := r.Context()
	wh, err := h.cfg.Services.Webhooks.Get(ctx, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	event := r.PathValue("event")
	as, err := h.cfg.Services.Webhooks.Attempts(ctx, wh.ID, event)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "webhook_delivery", webhookDelivery{Webhook: wh, EventID: event, Attempts: as})
}
