package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// FindOutcome returns the stored outcome of an idempotency key.
func (s *Store) FindOutcome(ctx context.Context, activityID, userID, key string) (registration.IdempotentOutcome, bool, error) {
	o := registration.IdempotentOutcome{UserID: userID, Key: key}
	err := s.db.QueryRow(ctx, `
		SELECT i.request_hash, i.outcome, coalesce(i.registration_id, ''), i.body
		FROM idempotency_key i JOIN activity a ON a.id = i.activity_id
		WHERE a.public_id = $1 AND i.user_id = $2 AND i.key = $3`, activityID, userID, key).
		Scan(&o.RequestHash, &o.Outcome, &o.RegistrationID, &o.Body)
	if errors.Is(err, pgx.ErrNoRows) {
		return o, false, nil
	}
	if err != nil {
		return o, false, interpret(err)
	}
	return o, true, nil
}

// PurgeOutcomes deletes idempotency records created before t.
func (s *Store) PurgeOutcomes(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM idempotency_key WHERE created_at < $1`, before)
	return tag.RowsAffected(), interpret(err)
}

// batchOutcomes adds the insert of the plans' idempotency records to b.
func batchOutcomes(b *pgx.Batch, ws []*activityWork) {
	var aids []int64
	var users, keys, outcomes, regIDs []string
	var hashes, bodies [][]byte
	for _, w := range ws {
		for _, o := range w.plan.Records {
			aids = append(aids, w.aid)
			users, keys, outcomes, regIDs = append(users, o.UserID), append(keys, o.Key), append(outcomes, o.Outcome), append(regIDs, o.RegistrationID)
			hashes, bodies = append(hashes, o.RequestHash), append(bodies, o.Body)
		}
	}
	if len(aids) == 0 {
		return
	}
	b.Queue(`
		INSERT INTO idempotency_key (activity_id, user_id, key, request_hash, outcome, registration_id, body)
		SELECT t.activity_id, t.user_id, t.key, t.hash, t.outcome, nullif(t.registration_id, ''), t.body
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::text[], $7::bytea[])
			AS t(activity_id, user_id, key, hash, outcome, registration_id, body)`,
		aids, users, keys, hashes, outcomes, regIDs, bodies)
}

// batchKeyOutcomes adds to b the read of the stored outcomes of the
// signups' idempotency keys ((keyAIDs[i], users[i], keys[i]) each).
func batchKeyOutcomes(b *pgx.Batch, keyAIDs []int64, users, keys []string, byAID map[int64]*activityWork) {
	b.Queue(`SELECT i.activity_id, i.user_id, i.key, i.request_hash, i.outcome, coalesce(i.registration_id, ''), i.body
		FROM unnest($1::bigint[], $2::text[], $3::text[]) AS k(activity_id, user_id, key)
		JOIN idempotency_key i ON i.activity_id = k.activity_id AND i.user_id = k.user_id AND i.key = k.key`,
		keyAIDs, users, keys).Query(func(rows pgx.Rows) error {
		var aid int64
		var o registration.IdempotentOutcome
		_, err := pgx.ForEachRow(rows, []any{&aid, &o.UserID, &o.Key, &o.RequestHash, &o.Outcome, &o.RegistrationID, &o.Body}, func() error {
			if w := byAID[aid]; w != nil {
				w.state.Outcomes[registration.IdempotencyRef{UserID: o.UserID, Key: o.Key}] = o
			}
			return nil
		})
		return err
	})
}
