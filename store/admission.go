package store

import (
	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// batchAdmissions reads the admitted queue places of the signups'
// admission tokens into their activities' states, locking them: the
// admission controller cannot expire a place while a signup uses it.
func batchAdmissions(b *pgx.Batch, tokens []string, byAID map[int64]*activityWork) {
	b.Queue(`SELECT activity_id, token, user_id, token_expires_at FROM queue_ticket
		WHERE token = ANY($1) AND state = 'admitted' ORDER BY id FOR UPDATE`, tokens).Query(func(rows pgx.Rows) error {
		var aid int64
		var token string
		var a registration.AdmittedPlace
		_, err := pgx.ForEachRow(rows, []any{&aid, &token, &a.UserID, &a.ExpiresAt}, func() error {
			if w := byAID[aid]; w != nil {
				a.Token = token
				w.state.Admissions[token] = a
			}
			return nil
		})
		return err
	})
}

// batchUsedTokens marks the admission tokens that signups used.
func batchUsedTokens(b *pgx.Batch, work []*activityWork) {
	var used []string
	for _, w := range work {
		used = append(used, w.plan.UsedTokens...)
	}
	if len(used) > 0 {
		b.Queue(`UPDATE queue_ticket SET state = 'used' WHERE token = ANY($1) AND state = 'admitted'`, used)
	}
}
