package store_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/store"
)

// lostCommit runs a transaction that inserts note id through a proxy,
// breaks the link in direction right after the insert was answered, sends
// COMMIT, and heals the link a moment later: what the store answers.
func lostCommit(t *testing.T, direction, id string) (direct string, answer error) {
	t.Helper()
	direct = testenv.NewDatabase(t)
	u, err := url.Parse(direct)
	require.NoError(t, err)
	proxy := testenv.StartProxy(t, "pg-"+id, u.Host)
	u.Host = proxy.Addr
	// Two connections: the one the transaction uses has prepared its
	// statements (COMMIT among them) on an earlier transaction, as a
	// connection of a running service has.
	s := store.New(testenv.Pool(t, u.String(), 2))
	for range 2 {
		require.NoError(t, s.InsertNoteThenCommit(context.Background(), id+"-warm", func() {}, time.Second))
	}
	answer = s.InsertNoteThenCommit(context.Background(), id, func() {
		require.NoError(t, proxy.HalfOpen(direction))
		time.AfterFunc(time.Second, proxy.Heal)
	}, 300*time.Millisecond)
	return direct, answer
}

func noteRows(t *testing.T, url, id string) int {
	t.Helper()
	var n int
	require.NoError(t, testenv.Pool(t, url, 1).QueryRow(context.Background(),
		`SELECT count(*) FROM note_stats WHERE note_id = $1`, id).Scan(&n))
	return n
}

// TestACommitWhoseAnswerIsLostIsASuccess: the COMMIT reached PostgreSQL but
// its answer was lost; the transaction's status, asked on another
// connection, says it committed, so it is no error.
func TestACommitWhoseAnswerIsLostIsASuccess(t *testing.T) {
	t.Parallel()
	direct, err := lostCommit(t, testenv.Downstream, "answer-lost")
	require.Equal(t, 1, noteRows(t, direct, "answer-lost"), "the commit happened")
	require.NoError(t, err, "the commit happened")
}

// TestACommitThatNeverArrivedIsAnError: the COMMIT never reached
// PostgreSQL; the transaction, still open, is ended, so the error is true:
// nothing was written.
func TestACommitThatNeverArrivedIsAnError(t *testing.T) {
	t.Parallel()
	direct, err := lostCommit(t, testenv.Upstream, "commit-lost")
	require.True(t, capacityd.IsCode(err, capacityd.EUnavailable), "%v", err)
	require.Equal(t, 0, noteRows(t, direct, "commit-lost"))
}
