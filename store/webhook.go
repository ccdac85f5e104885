package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/webhook"
)

// webhookColumns are a webhook's columns, for a query over webhook w left
// joined with its activity a.
const webhookColumns = `w.public_id, w.url, w.events, a.public_id, w.created_at, w.disabled_at`

func scanWebhook(row pgx.CollectableRow) (webhook.Webhook, error) {
	var w webhook.Webhook
	err := row.Scan(&w.ID, &w.URL, &w.Events, &w.ActivityID, &w.CreatedAt, &w.DisabledAt)
	w.CreatedAt = w.CreatedAt.UTC()
	if w.DisabledAt != nil {
		t := w.DisabledAt.UTC()
		w.DisabledAt = &t
	}
	return w, err
}

// CreateWebhook stores a webhook with its sealed secret.
func (s *Store) CreateWebhook(ctx context.Context, w webhook.Webhook, sealedSecret []byte) (webhook.Webhook, error) {
	var aid *int64
	if w.ActivityID != nil {
		id, err := s.activityID(ctx, *w.ActivityID)
		if err != nil {
			return webhook.Webhook{}, err
		}
		aid = &id
	}
	err := s.db.QueryRow(ctx, createWebhookSQL, w.ID, w.URL, w.Events, aid, sealedSecret).Scan(&w.CreatedAt)
	w.CreatedAt = w.CreatedAt.UTC()
	return w, interpret(err)
}

// createWebhookSQL inserts a webhook with its cursors: after the last
// event of every activity it receives from, so that it receives the
// events recorded from now on. (An activity with no event yet has no
// cursor: a missing cursor is at 0.)
const createWebhookSQL = `
	WITH w AS (
		INSERT INTO webhook (public_id, url, events, activity_id, secret)
		VALUES ($1, $2, $3, $4, $5) RETURNING id, activity_id, created_at
	), c AS (
		INSERT INTO webhook_cursor (webhook_id, activity_id, seq)
		SELECT w.id, s.activity_id, s.last_seq FROM w JOIN activity_state s
			ON w.activity_id IS NULL OR s.activity_id = w.activity_id
		WHERE s.last_seq > 0
	)
	SELECT created_at FROM w`

// StoredSecrets returns every webhook's secret as it is stored.
func (s *Store) StoredSecrets(ctx context.Context) ([]webhook.StoredSecret, error) {
	rows, err := s.db.Query(ctx, `SELECT public_id, secret FROM webhook ORDER BY id`)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (webhook.StoredSecret, error) {
		var c webhook.StoredSecret
		return c, row.Scan(&c.WebhookID, &c.Stored)
	})
	return out, interpret(err)
}

// ReplaceSecret stores a webhook's secret in another form if it is still
// stored as old.
func (s *Store) ReplaceSecret(ctx context.Context, webhookID string, old, replacement []byte) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE webhook SET secret = $3 WHERE public_id = $1 AND secret = $2`, webhookID, old, replacement)
	return tag.RowsAffected() == 1, interpret(err)
}

// Webhooks returns every webhook, oldest first.
func (s *Store) Webhooks(ctx context.Context) ([]webhook.Webhook, error) {
	rows, err := s.db.Query(ctx, `SELECT `+webhookColumns+`
		FROM webhook w LEFT JOIN activity a ON a.id = w.activity_id ORDER BY w.id`)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, scanWebhook)
	return out, interpret(err)
}

// Webhook returns one webhook.
func (s *Store) Webhook(ctx context.Context, id string) (webhook.Webhook, error) {
	rows, err := s.db.Query(ctx, `SELECT `+webhookColumns+`
		FROM webhook w LEFT JOIN activity a ON a.id = w.activity_id WHERE w.public_id = $1`, id)
	if err != nil {
		return webhook.Webhook{}, interpret(err)
	}
	w, err := pgx.CollectExactlyOneRow(rows, scanWebhook)
	if errors.Is(err, pgx.ErrNoRows) {
		return w, webhook.NotFound(id)
	}
	return w, interpret(err)
}
