package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/registration"
)

// takenBound is an upper bound of an activity's occupying registrations,
// valid while the activity's admission epoch is still epoch.
type takenBound struct {
	epoch int64
	taken int
}

// Admit runs one group admission transaction for a batch of signups of one
// activity:
//
//	BEGIN
//	SET LOCAL lock_timeout; pg_advisory_xact_lock(ns, activity)  -- one round trip with the reads
//	capacity and admission epoch; holders among the batch's users; stored idempotency outcomes
//	COUNT(occupying), unless this instance holds a bound for the current epoch
//	INSERT the admitted rows (one statement); bump the epoch
//	INSERT the idempotency records (one statement)
//	COMMIT
//
// One lock, at most one COUNT and one commit serve the whole batch. The
// COUNT over the activity's occupying rows is the authority: a batch admits
// on an upper bound of it (the last COUNT this instance made at the current
// epoch plus what it admitted since; cancellations and expiries only lower
// the truth) and counts exactly before it refuses anyone as full. A hot
// activity thus pays the COUNT once per epoch change, not once per batch.
func (s *Store) Admit(ctx context.Context, activityID string, reqs []registration.AdmissionRequest) ([]registration.AdmissionResult, error) {
	aid, err := s.activityID(ctx, activityID)
	if err != nil {
		return nil, err
	}
	users := make([]string, len(reqs))
	var keyUsers, keys []string
	for i, r := range reqs {
		users[i] = r.UserID
		if r.IdempotencyKey != "" {
			keyUsers = append(keyUsers, r.UserID)
			keys = append(keys, r.IdempotencyKey)
		}
	}

	var results []registration.AdmissionResult
	var next takenBound
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		st, epoch, err := readAdmissionState(ctx, tx, aid, users, keyUsers, keys)
		if err != nil {
			return err
		}
		exact := false
		if b, ok := s.bound(aid); ok && b.epoch == epoch {
			st.Taken = b.taken
		} else {
			if st.Taken, err = countOccupying(ctx, tx, aid); err != nil {
				return err
			}
			exact = true
		}
		decisions := registration.Decide(activityID, st, reqs)
		if !exact && refusesAsFull(decisions) {
			if st.Taken, err = countOccupying(ctx, tx, aid); err != nil {
				return err
			}
			decisions = registration.Decide(activityID, st, reqs)
		}
		results, err = insertAdmitted(ctx, tx, aid, activityID, reqs, decisions)
		if err != nil {
			return err
		}
		admitted := 0
		for _, d := range decisions {
			if d.Admit {
				admitted++
			}
		}
		if admitted > 0 {
			if epoch, err = bumpAdmissionEpoch(ctx, tx, aid); err != nil {
				return err
			}
		}
		next = takenBound{epoch: epoch, taken: st.Taken + admitted}
		return recordOutcomes(ctx, tx, aid, reqs, decisions, results)
	})
	if err != nil {
		s.setBound(aid, takenBound{}, false)
		return nil, err
	}
	s.setBound(aid, next, true)
	return results, nil
}

func refusesAsFull(ds []registration.Decision) bool {
	for _, d := range ds {
		if capacityd.IsCode(d.Result.Err, capacityd.EActivityFull) && !d.Result.Replayed {
			return true
		}
	}
	return false
}

func (s *Store) bound(aid int64) (takenBound, bool) {
	s.boundsMu.Lock()
	defer s.boundsMu.Unlock()
	b, ok := s.bounds[aid]
	return b, ok
}

// setBound remembers b for the activity after a commit, or forgets the
// activity's bound (ok false) after a failure, when nothing is known.
func (s *Store) setBound(aid int64, b takenBound, ok bool) {
	s.boundsMu.Lock()
	defer s.boundsMu.Unlock()
	if !ok {
		delete(s.bounds, aid)
		return
	}
	s.bounds[aid] = b
}

// countOccupying is the authority: the activity's occupying registrations.
func countOccupying(ctx context.Context, db DBTX, aid int64) (int, error) {
	var n int64
	err := db.QueryRow(ctx, CountOccupyingSQL, aid).Scan(&n)
	return int(n), err
}

// bumpAdmissionEpoch tells every instance that the activity's occupying
// registrations grew; it runs under the admission lock.
func bumpAdmissionEpoch(ctx context.Context, db DBTX, aid int64) (int64, error) {
	var epoch int64
	err := db.QueryRow(ctx, `
		INSERT INTO activity_admission AS e (activity_id, epoch) VALUES ($1, 1)
		ON CONFLICT (activity_id) DO UPDATE SET epoch = e.epoch + 1
		RETURNING epoch`, aid).Scan(&epoch)
	return epoch, err
}

// readAdmissionState takes the admission lock and reads, in one round trip,
// what Decide needs but the taken count, and the activity's admission
// epoch. Each statement of the batch runs after the previous one, so the
// reads see everything committed before the lock was granted.
func readAdmissionState(ctx context.Context, tx pgx.Tx, aid int64, users, keyUsers, keys []string) (registration.AdmissionState, int64, error) {
	var epoch int64
	st := registration.AdmissionState{
		Holders:  make(map[string]string),
		Outcomes: make(map[registration.IdempotencyRef]registration.IdempotentOutcome),
	}
	b := &pgx.Batch{}
	lockActivity(b, aid)
	b.Queue(`SELECT a.capacity, coalesce((SELECT epoch FROM activity_admission WHERE activity_id = a.id), 0)
		FROM activity a WHERE a.id = $1`, aid).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.Capacity, &epoch)
	})
	b.Queue(`SELECT user_id, public_id FROM registration
		WHERE activity_id = $1 AND user_id = ANY($2::text[]) AND status IN `+occupying, aid, users).Query(func(rows pgx.Rows) error {
		var u, id string
		_, err := pgx.ForEachRow(rows, []any{&u, &id}, func() error { st.Holders[u] = id; return nil })
		return err
	})
	if len(keys) > 0 {
		b.Queue(`SELECT i.user_id, i.key, i.request_hash, i.outcome, coalesce(i.registration_id, ''), i.body
			FROM idempotency_key i
			JOIN unnest($2::text[], $3::text[]) AS k(user_id, key) ON k.user_id = i.user_id AND k.key = i.key
			WHERE i.activity_id = $1`, aid, keyUsers, keys).Query(func(rows pgx.Rows) error {
			var o registration.IdempotentOutcome
			_, err := pgx.ForEachRow(rows, []any{&o.UserID, &o.Key, &o.RequestHash, &o.Outcome, &o.RegistrationID, &o.Body}, func() error {
				st.Outcomes[registration.IdempotencyRef{UserID: o.UserID, Key: o.Key}] = o
				return nil
			})
			return err
		})
	}
	return st, epoch, tx.SendBatch(ctx, b).Close()
}

// insertAdmitted inserts the admitted registrations in one statement and
// returns every request's result.
func insertAdmitted(ctx context.Context, tx pgx.Tx, aid int64, activityID string, reqs []registration.AdmissionRequest, ds []registration.Decision) ([]registration.AdmissionResult, error) {
	results := make([]registration.AdmissionResult, len(reqs))
	var ids, users, metas []string
	for i, d := range ds {
		if d.Admit {
			ids = append(ids, reqs[i].RegistrationID)
			users = append(users, reqs[i].UserID)
			metas = append(metas, string(reqs[i].Metadata))
		} else if d.SameAs < 0 {
			results[i] = d.Result
		}
	}
	if len(ids) > 0 {
		rows, err := tx.Query(ctx, `
			INSERT INTO registration (public_id, activity_id, user_id, status, metadata)
			SELECT t.public_id, $1, t.user_id, 'pending', t.metadata::json
			FROM unnest($2::text[], $3::text[], $4::text[]) AS t(public_id, user_id, metadata)
			RETURNING public_id, id, created_at, updated_at`, aid, ids, users, metas)
		if err != nil {
			return nil, err
		}
		inserted := make(map[string]registration.Registration, len(ids))
		var r registration.Registration
		_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Seq, &r.CreatedAt, &r.UpdatedAt}, func() error {
			inserted[r.ID] = r
			return nil
		})
		if err != nil {
			return nil, err
		}
		for i, d := range ds {
			if !d.Admit {
				continue
			}
			row, ok := inserted[reqs[i].RegistrationID]
			if !ok {
				return nil, errors.New("admission: an admitted registration was not inserted")
			}
			reg := &registration.Registration{
				ID: row.ID, ActivityID: activityID, UserID: reqs[i].UserID, Status: registration.Pending,
				Metadata: reqs[i].Metadata, CreatedAt: row.CreatedAt.UTC(), UpdatedAt: row.UpdatedAt.UTC(), Seq: row.Seq,
			}
			results[i] = registration.AdmissionResult{Registration: reg}
		}
	}
	for i, d := range ds {
		if d.SameAs >= 0 {
			results[i] = results[d.SameAs]
			results[i].Replayed = true
		}
	}
	return results, nil
}

// recordOutcomes stores the outcome of every first use of an idempotency
// key in the batch, in the admission transaction.
func recordOutcomes(ctx context.Context, tx pgx.Tx, aid int64, reqs []registration.AdmissionRequest, ds []registration.Decision, results []registration.AdmissionResult) error {
	var users, keys, outcomes, regIDs []string
	var hashes, bodies [][]byte
	for i, d := range ds {
		if !d.Record {
			continue
		}
		o, err := registration.OutcomeOf(reqs[i], results[i])
		if err != nil {
			return err
		}
		users, keys, outcomes, regIDs = append(users, o.UserID), append(keys, o.Key), append(outcomes, o.Outcome), append(regIDs, o.RegistrationID)
		hashes, bodies = append(hashes, o.RequestHash), append(bodies, o.Body)
	}
	if len(keys) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO idempotency_key (activity_id, user_id, key, request_hash, outcome, registration_id, body)
		SELECT $1, t.user_id, t.key, t.hash, t.outcome, nullif(t.registration_id, ''), t.body
		FROM unnest($2::text[], $3::text[], $4::bytea[], $5::text[], $6::text[], $7::bytea[])
			AS t(user_id, key, hash, outcome, registration_id, body)`,
		aid, users, keys, hashes, outcomes, regIDs, bodies)
	return err
}

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
