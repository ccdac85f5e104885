package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/registration"
)

// CheckFull answers each check from one snapshot of the authority (one
// statement), without a lock: the activity's capacity, occupying and
// waitlisted registrations, its pools' capacities and taken seats and
// waiting-list setting (the caller applies
// registration.Admit to them), and which of the users hold an active
// registration of it.
func (s *Store) CheckFull(ctx context.Context, checks []registration.FullCheck) ([]registration.FullAnswer, error) {
	out := make([]registration.FullAnswer, len(checks))
	index := make(map[int64][]int, len(checks))
	var aids, pairAIDs []int64
	var pairUsers []string
	public := make([]string, len(checks))
	for i, c := range checks {
		public[i] = c.ActivityID
	}
	ids, err := s.activityIDs(ctx, public)
	if err != nil {
		return nil, err
	}
	for i, c := range checks {
		aid, ok := ids[c.ActivityID]
		if !ok {
			return nil, registration.ActivityNotFound(c.ActivityID)
		}
		if _, ok := index[aid]; !ok {
			aids = append(aids, aid)
		}
		index[aid] = append(index[aid], i)
		out[i].Holders = make(map[string]string)
		for _, u := range c.UserIDs {
			pairAIDs, pairUsers = append(pairAIDs, aid), append(pairUsers, u)
		}
	}
	// The statement runs with its generic plan (see readGeneric): a custom
	// plan would plan each pool's subqueries again at every execution,
	// which cost more than running them. The pools' columns are read only
	// for a check of a pooled activity.
	pooled, err := s.members.anyPooled(ctx, s.db, aids)
	if err != nil {
		return nil, err
	}
	pools := `'{}'::text[], '{}'::bigint[], '{}'::bigint[], '{}'::bigint[]`
	if pooled {
		pools = poolArraySQL("p.public_id") + `, ` + activityPoolsSQL
	}
	var aid, taken, waiting, reserved int64
	var capacity int
	var waitlist bool
	var policy registration.WaitlistPolicy
	var maxSeats int
	var users, regs []string
	var poolIDs []string
	var poolCapacities, poolTaken, poolReserved []int64
	err = s.readGeneric(ctx, func(b *pgx.Batch) {
		b.Queue(fullCheckSQL(pools), aids, pairAIDs, pairUsers).Query(func(rows pgx.Rows) error {
			_, err := pgx.ForEachRow(rows, []any{&aid, &capacity, &waitlist, &policy, &maxSeats, &taken, &waiting, &users, &regs,
				&reserved, &poolIDs, &poolCapacities, &poolTaken, &poolReserved}, func() error {
				pools := poolRooms(poolIDs, poolCapacities, poolTaken, poolReserved)
				for _, i := range index[aid] {
					out[i].Capacity, out[i].Taken, out[i].Waiting, out[i].Waitlist = capacity, int(taken), int(waiting), waitlist
					out[i].Reserved = int(reserved)
					out[i].Policy, out[i].MaxSeats, out[i].Pools = policy, maxSeats, pools
					for k, u := range users {
						out[i].Holders[u] = regs[k]
					}
				}
				return nil
			})
			return err
		})
	})
	return out, err
}

// fullCheckSQL reads the checks' activities ($1), the active
// registrations of the (activity, user) pairs ($2, $3) and, with pools,
// the activities' pools.
func fullCheckSQL(pools string) string {
	return `
		WITH h AS (
			SELECT r.activity_id, r.user_id, r.public_id
			FROM unnest($2::bigint[], $3::text[]) AS k(aid, uid)
			JOIN registration r ON r.activity_id = k.aid AND r.user_id = k.uid
			WHERE r.status IN ` + active + `)
		SELECT a.id, a.capacity, a.waitlist, a.waitlist_policy, a.max_seats_per_registration,
			(SELECT coalesce(sum(r.seats), 0) FROM registration r WHERE r.activity_id = a.id AND r.status IN ` + occupying + `),
			(SELECT count(*) FROM registration r WHERE r.activity_id = a.id AND r.status = 'waitlisted'),
			coalesce((SELECT array_agg(h.user_id ORDER BY h.user_id) FROM h WHERE h.activity_id = a.id), '{}'),
			coalesce((SELECT array_agg(h.public_id ORDER BY h.user_id) FROM h WHERE h.activity_id = a.id), '{}'),
			` + reservedSQL("a.id") + `,
			` + pools + `
		FROM activity a WHERE a.id = ANY($1)`
}
