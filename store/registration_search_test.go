package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/registration"
	"github.com/physiciansnet/capacityd/store"
)

// TestAUsersRegistrationsOfOneActivityAreFoundByTheUserIndex: the search
// of an activity's registrations by user id returns that user's
// registrations of that activity only, in creation order, by status and
// in keyset pages, with the waiting-list position; the service refuses a
// malformed user id and an unknown activity; and the statement reads the
// user's index, however many registrations the activity has.
func TestAUsersRegistrationsOfOneActivityAreFoundByTheUserIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.NewDatabase(t)
	pool := testenv.Pool(t, url, 4)
	s := store.New(pool)
	acts := createActivities(t, s, 2, 100)
	big, other := acts[0], acts[1]
	// 20,000 registrations of others in the big activity; bob's: two
	// cancelled and one waitlisted there, one in the other activity.
	for _, q := range []string{`
		INSERT INTO registration (public_id, activity_id, user_id, status)
		SELECT 'r_s' || lpad(g::text, 25, '0'), a.id, 'user-' || g, 'cancelled'
		FROM activity a, generate_series(1, 20000) g WHERE a.public_id = $1`, `
		INSERT INTO registration (public_id, activity_id, user_id, status, waitlist_seq)
		SELECT v.id, a.id, 'bob', v.status, v.seq
		FROM activity a, (VALUES ('r_B0000000000000000000000001', 'cancelled', NULL::bigint),
			('r_B0000000000000000000000002', 'cancelled', NULL), ('r_B0000000000000000000000003', 'waitlisted', 7)) v(id, status, seq)
		WHERE a.public_id = $1`, `
		INSERT INTO registration (public_id, activity_id, user_id, status)
		SELECT 'r_B0000000000000000000000004', a.id, 'bob', 'pending' FROM activity a WHERE a.public_id = $1`} {
		act := big
		if strings.Contains(q, "'pending'") {
			act = other
		}
		_, err := pool.Exec(ctx, q, act)
		require.NoError(t, err)
	}
	_, err := pool.Exec(ctx, `ANALYZE registration`)
	require.NoError(t, err)

	ids := func(rs []registration.Registration) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.ID
		}
		return out
	}
	all, err := s.ActivityUserRegistrations(ctx, registration.ActivityUserFilter{ActivityID: big, UserID: "bob", Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{"r_B0000000000000000000000001", "r_B0000000000000000000000002", "r_B0000000000000000000000003"}, ids(all))
	require.Nil(t, all[0].WaitlistPosition)
	require.NotNil(t, all[2].WaitlistPosition)
	require.Equal(t, 1, *all[2].WaitlistPosition)

	waiting, err := s.ActivityUserRegistrations(ctx, registration.ActivityUserFilter{ActivityID: big, UserID: "bob",
		Status: registration.Waitlisted, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{"r_B0000000000000000000000003"}, ids(waiting))

	regs := registration.NewService(registration.Config{Store: s})
	first, err := regs.ActivityUserRegistrations(ctx, registration.ActivityUserFilter{ActivityID: big, UserID: "bob", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"r_B0000000000000000000000001", "r_B0000000000000000000000002"}, ids(first.Items))
	require.NotNil(t, first.NextCursor)
	after, err := registration.DecodeCursor(*first.NextCursor, registration.RegistrationCursor)
	require.NoError(t, err)
	second, err := regs.ActivityUserRegistrations(ctx, registration.ActivityUserFilter{ActivityID: big, UserID: "bob", After: after, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"r_B0000000000000000000000003"}, ids(second.Items))
	require.Nil(t, second.NextCursor)

	none, err := regs.ActivityUserRegistrations(ctx, registration.ActivityUserFilter{ActivityID: other, UserID: "carol"})
	require.NoError(t, err)
	require.Empty(t, none.Items)
	_, err = regs.ActivityUserRegistrations(ctx, registration.ActivityUserFilter{ActivityID: big, UserID: ""})
	require.Equal(t, capacityd.EInvalid, capacityd.ErrorCode(err))
	_, err = regs.ActivityUserRegistrations(ctx, registration.ActivityUserFilter{ActivityID: "a_00000000000000000000000999", UserID: "bob"})
	require.Equal(t, capacityd.ENotFound, capacityd.ErrorCode(err))
	// A cursor of another activity's registration names nothing here.
	_, err = regs.ActivityUserRegistrations(ctx, registration.ActivityUserFilter{ActivityID: big, UserID: "bob",
		After: "r_B0000000000000000000000004"})
	require.Equal(t, capacityd.EInvalid, capacityd.ErrorCode(err))

	var aid int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM activity WHERE public_id = $1`, big).Scan(&aid))
	used := indexesUsed(t, pool, store.ActivityUserSQL, "bob", aid, int64(0), 101, "")
	require.Contains(t, used, "registration_user_idx")
}

// indexesUsed are the indexes the plan of q reads, but those of its
// subplans (a waitlisted registration's count of the line ahead).
func indexesUsed(t *testing.T, pool *pgxpool.Pool, q string, args ...any) []string {
	t.Helper()
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	var raw []byte
	require.NoError(t, pool.QueryRow(context.Background(), `EXPLAIN (FORMAT JSON) `+q, args...).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &plan))
	var used []string
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.ParentRelship == "SubPlan" {
			return
		}
		if n.IndexName != "" {
			used = append(used, n.IndexName)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plan[0].Plan)
	return used
}
