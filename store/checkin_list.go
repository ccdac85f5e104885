package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/registration"
)

// listColumns are a check-in list's columns, for a query over checkin_list l.
const listColumns = `l.id, l.public_id, l.name, l.activity_ids, l.entry, l.max_inside, l.opens_at, l.closes_at, l.door_roles,
	l.checked_in, l.inside, l.conflicts, l.last_seq, l.created_at, l.updated_at`

func scanList(row pgx.Row) (checkin.List, error) {
	var l checkin.List
	err := row.Scan(&l.Seq, &l.ID, &l.Name, &l.ActivityIDs, &l.Entry, &l.MaxInside, &l.OpensAt, &l.ClosesAt, &l.DoorRoles,
		&l.CheckedIn, &l.Inside, &l.Conflicts, &l.LastSeq, &l.CreatedAt, &l.UpdatedAt)
	l.CreatedAt, l.UpdatedAt, l.OpensAt, l.ClosesAt = l.CreatedAt.UTC(), l.UpdatedAt.UTC(), utc(l.OpensAt), utc(l.ClosesAt)
	return l, err
}

// listFound names the list of a read that found none.
func listFound(err error, id string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return checkin.ListNotFound(id)
	}
	return err
}

// CreateCheckinList stores a new list with the public id id. An activity
// id that names none is not_found.
func (s *Store) CreateCheckinList(ctx context.Context, id string, in checkin.NewList, now time.Time) (checkin.List, error) {
	var out checkin.List
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		row := tx.QueryRow(ctx, `INSERT INTO checkin_list AS l (public_id, name, activity_ids, entry, max_inside, opens_at, closes_at,
				door_roles, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING `+listColumns,
			id, in.Name, in.ActivityIDs, string(in.Entry), in.MaxInside, in.OpensAt, in.ClosesAt, in.DoorRoles, now)
		l, err := scanList(row)
		if err != nil {
			return err
		}
		out = l
		return linkActivities(ctx, tx, l.Seq, l.ActivityIDs)
	})
	return out, err
}

// linkActivities makes the list's activity index name acts, refusing an
// id that names no activity.
func linkActivities(ctx context.Context, tx pgx.Tx, list int64, acts []string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM checkin_list_activity WHERE list_id = $1`, list); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `INSERT INTO checkin_list_activity (list_id, activity_id)
		SELECT $1, a.id FROM activity a WHERE a.public_id = ANY ($2)`, list, acts)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == int64(len(acts)) {
		return nil
	}
	var missing string
	err = tx.QueryRow(ctx, `SELECT x FROM unnest($1::text[]) AS x WHERE NOT EXISTS (SELECT 1 FROM activity a WHERE a.public_id = x) LIMIT 1`,
		acts).Scan(&missing)
	if err != nil {
		return err
	}
	return registration.ActivityNotFound(missing)
}

// GetCheckinList returns a list that was not deleted.
func (s *Store) GetCheckinList(ctx context.Context, id string) (checkin.List, error) {
	l, err := scanList(s.db.QueryRow(ctx, `SELECT `+listColumns+` FROM checkin_list l WHERE l.public_id = $1 AND l.deleted_at IS NULL`, id))
	return l, interpret(listFound(err, id))
}

// ListCheckinLists returns up to limit lists created before the list
// before ("" for the newest), of activityID's lists only when it is set.
func (s *Store) ListCheckinLists(ctx context.Context, activityID, before string, limit int) ([]checkin.List, error) {
	rows, err := s.db.Query(ctx, `SELECT `+listColumns+` FROM checkin_list l
		WHERE l.deleted_at IS NULL
			AND ($1 = '' OR EXISTS (SELECT 1 FROM checkin_list_activity la JOIN activity a ON a.id = la.activity_id
				WHERE la.list_id = l.id AND a.public_id = $1))
			AND ($2 = '' OR l.id < (SELECT id FROM checkin_list WHERE public_id = $2))
		ORDER BY l.id DESC LIMIT $3`, activityID, before, limit)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (checkin.List, error) { return scanList(r) })
	return out, interpret(err)
}

// UpdateCheckinList applies a patch under the list's lock.
func (s *Store) UpdateCheckinList(ctx context.Context, id string, p checkin.ListPatch, now time.Time) (checkin.List, error) {
	var out checkin.List
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		l, err := lockList(ctx, tx, id)
		if err != nil {
			return err
		}
		if out, err = p.Apply(l, now); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE checkin_list SET name = $2, activity_ids = $3, entry = $4, max_inside = $5, opens_at = $6,
			closes_at = $7, door_roles = $8, updated_at = $9 WHERE id = $1`,
			l.Seq, out.Name, out.ActivityIDs, string(out.Entry), out.MaxInside, out.OpensAt, out.ClosesAt, out.DoorRoles, now)
		if err != nil || p.ActivityIDs == nil {
			return err
		}
		return linkActivities(ctx, tx, l.Seq, out.ActivityIDs)
	})
	return out, err
}

// DeleteCheckinList deletes a list: it is read no more, and its history
// stays in its activities' events.
func (s *Store) DeleteCheckinList(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		l, err := lockList(ctx, tx, id)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE checkin_list SET deleted_at = now() WHERE id = $1`, l.Seq)
		return err
	})
}

// lockList reads a list that was not deleted under its row lock: every
// check-in of the list, and every change of its settings, holds it.
func lockList(ctx context.Context, tx pgx.Tx, id string) (checkin.List, error) {
	l, err := scanList(tx.QueryRow(ctx, lockListSQL, id))
	return l, listFound(err, id)
}

// lockListSQL reads the list $1, not deleted, under its row lock.
const lockListSQL = `SELECT ` + listColumns + ` FROM checkin_list l WHERE l.public_id = $1 AND l.deleted_at IS NULL FOR UPDATE`
