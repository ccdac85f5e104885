package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// reservedSQL is the unused seats of the live blocks of the activity of
// internal id actExpr: an index range of block_live_idx.
func reservedSQL(actExpr string) string {
	return `(SELECT coalesce(sum(b.seats - b.used), 0) FROM block b WHERE b.activity_id = ` + actExpr + ` AND b.ended_at IS NULL)`
}

// poolReservedSQL is the unused seats of the live blocks of the
// activities of the pool of internal id poolExpr.
func poolReservedSQL(poolExpr string) string {
	return `(SELECT coalesce(sum(b.seats - b.used), 0) FROM activity_pool m
		JOIN block b ON b.activity_id = m.activity_id AND b.ended_at IS NULL WHERE m.pool_id = ` + poolExpr + `)`
}

// blockColumns are a block's columns, for a query over block b joined
// with its activity a; scan them with scanBlock.
const blockColumns = `b.public_id, a.public_id, b.seats, b.used, b.code, b.role, b.expires_at, b.created_at`

func scanBlock(row pgx.Row, extra ...any) (registration.Block, error) {
	var b registration.Block
	err := row.Scan(append([]any{&b.ID, &b.ActivityID, &b.Seats, &b.Used, &b.Code, &b.Role, &b.ExpiresAt, &b.CreatedAt}, extra...)...)
	b.CreatedAt = b.CreatedAt.UTC()
	if b.ExpiresAt != nil {
		t := b.ExpiresAt.UTC()
		b.ExpiresAt = &t
	}
	return b, err
}

// ListBlocks returns the live blocks of an activity, oldest first.
func (s *Store) ListBlocks(ctx context.Context, activityID string) ([]registration.Block, error) {
	aid, err := s.activityID(ctx, activityID)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT `+blockColumns+` FROM block b JOIN activity a ON a.id = b.activity_id
		WHERE b.activity_id = $1 AND b.ended_at IS NULL ORDER BY b.id`, aid)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (registration.Block, error) { return scanBlock(row) })
	if out == nil {
		out = []registration.Block{}
	}
	return out, interpret(err)
}

// GetBlock returns a live block, or not_found.
func (s *Store) GetBlock(ctx context.Context, id string) (registration.Block, error) {
	b, err := scanBlock(s.db.QueryRow(ctx, `SELECT `+blockColumns+` FROM block b JOIN activity a ON a.id = b.activity_id
		WHERE b.public_id = $1 AND b.ended_at IS NULL`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return registration.Block{}, registration.BlockNotFound(id)
	}
	return b, interpret(err)
}

// ClaimDueBlocks returns up to limit live blocks whose expiry is due at
// now, oldest deadline first, skipping rows that another instance's claim
// or change transaction holds at the moment. As for holds, the expiries
// themselves are commands on the activities' queues.
func (s *Store) ClaimDueBlocks(ctx context.Context, now time.Time, limit int) ([]registration.DueBlock, error) {
	rows, err := s.db.Query(ctx, `
		SELECT b.public_id, a.public_id FROM block b JOIN activity a ON a.id = b.activity_id
		WHERE b.ended_at IS NULL AND b.expires_at <= $1
		ORDER BY b.expires_at LIMIT $2
		FOR UPDATE OF b SKIP LOCKED`, now, limit)
	if err != nil {
		return nil, interpret(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[registration.DueBlock])
	return out, interpret(err)
}

// batchBlocks adds to b the read of the live blocks of the activities of
// a change transaction, under their locks.
func batchBlocks(b *pgx.Batch, aids []int64, byAID map[int64]*activityWork) {
	b.Queue(`SELECT `+blockColumns+`, b.activity_id FROM block b JOIN activity a ON a.id = b.activity_id
		WHERE b.activity_id = ANY($1) AND b.ended_at IS NULL ORDER BY b.id`, aids).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var aid int64
			blk, err := scanBlock(rows, &aid)
			if err != nil {
				return err
			}
			if w := byAID[aid]; w != nil {
				w.state.Blocks = append(w.state.Blocks, blk)
			}
		}
		return rows.Err()
	})
}

// blocksOf collects the block rows a transaction creates and changes.
type blocksOf struct {
	inIDs, inCodes, inRoles []*string
	inAIDs                  []int64
	inSeats                 []int32
	inExpires               []*time.Time
	inAt                    []time.Time
	upIDs                   []string
	upUsed                  []int32
	upEnded                 []*string
	upAt                    []time.Time
}

func (c *blocksOf) add(aid int64, ch registration.BlockChange, at time.Time) {
	blk := ch.Block
	if ch.Created {
		id := blk.ID
		c.inIDs, c.inAIDs, c.inSeats = append(c.inIDs, &id), append(c.inAIDs, aid), append(c.inSeats, int32(blk.Seats))
		c.inCodes, c.inRoles = append(c.inCodes, blk.Code), append(c.inRoles, blk.Role)
		c.inExpires, c.inAt = append(c.inExpires, blk.ExpiresAt), append(c.inAt, blk.CreatedAt)
	}
	// A new block is written again with its use and end (one statement
	// order: insert, then update).
	if ch.Created && blk.Used == 0 && ch.Ended == "" {
		return
	}
	var ended *string
	if ch.Ended != "" {
		reason := "deleted"
		if ch.Ended == registration.EventBlockExpired {
			reason = "expired"
		}
		ended = &reason
	}
	c.upIDs, c.upUsed, c.upEnded, c.upAt = append(c.upIDs, blk.ID), append(c.upUsed, int32(blk.Used)), append(c.upEnded, ended), append(c.upAt, at)
}

// batch adds to b the statements that write the collected blocks.
func (c *blocksOf) batch(b *pgx.Batch) {
	if len(c.inIDs) > 0 {
		b.Queue(`INSERT INTO block (public_id, activity_id, seats, code, role, expires_at, created_at)
			SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[])`,
			c.inIDs, c.inAIDs, c.inSeats, c.inCodes, c.inRoles, c.inExpires, c.inAt)
	}
	if len(c.upIDs) > 0 {
		b.Queue(`UPDATE block b SET used = u.used,
				ended_at = CASE WHEN u.reason IS NULL THEN NULL ELSE u.at END, end_reason = u.reason
			FROM unnest($1::text[], $2::int[], $3::text[], $4::timestamptz[]) AS u(public_id, used, reason, at)
			WHERE b.public_id = u.public_id AND b.ended_at IS NULL`, c.upIDs, c.upUsed, c.upEnded, c.upAt)
	}
}
