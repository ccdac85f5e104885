package store_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
	"github.com/physiciansnet/capacityd/store"
)

func secretHash(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// TestALinkIsUsedOnceAcrossInstances: forty uses of one sign-in link at
// once, from two instances, start one session between them; an expired
// link starts none.
func TestALinkIsUsedOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabase(t)
	stores := []*store.Store{store.New(testenv.Pool(t, url, 8)), store.New(testenv.Pool(t, url, 8))}
	ctx := context.Background()
	require.NoError(t, stores[0].CreateLink(ctx, secretHash("link"), console.Grant{Sub: "ana", Roles: []string{"admin"}, ExpiresAt: time.Now().Add(time.Minute)}))
	var used atomic.Int32
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			g, err := stores[i%2].UseLink(ctx, secretHash("link"))
			if err == nil {
				used.Add(1)
				require.Equal(t, "ana", g.Sub)
				require.Equal(t, []string{"admin"}, g.Roles)
				return
			}
			require.ErrorIs(t, err, console.ErrNoSession)
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), used.Load())

	require.NoError(t, stores[0].CreateLink(ctx, secretHash("old"), console.Grant{Sub: "ana", ExpiresAt: time.Now().Add(-time.Second)}))
	_, err := stores[1].UseLink(ctx, secretHash("old"))
	require.ErrorIs(t, err, console.ErrNoSession)
}

// TestASessionEndsOnEveryInstance: a session read on one instance is
// gone on the other once revoked there, and an expired one is never read.
func TestASessionEndsOnEveryInstance(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabase(t)
	a, b := store.New(testenv.Pool(t, url, 2)), store.New(testenv.Pool(t, url, 2))
	ctx := context.Background()
	for i := range 3 {
		require.NoError(t, a.CreateSession(ctx, secretHash(fmt.Sprint("s", i)), console.Grant{Sub: "ana", ExpiresAt: time.Now().Add(time.Hour)}))
	}
	g, err := b.Session(ctx, secretHash("s0"))
	require.NoError(t, err)
	require.Equal(t, "ana", g.Sub)
	require.Empty(t, g.Roles)
	require.NoError(t, a.RevokeSession(ctx, secretHash("s0")))
	_, err = b.Session(ctx, secretHash("s0"))
	require.ErrorIs(t, err, console.ErrNoSession)
	_, err = b.Session(ctx, secretHash("s1"))
	require.NoError(t, err, "the other sessions go on")

	require.NoError(t, a.CreateSession(ctx, secretHash("expired"), console.Grant{Sub: "ana", ExpiresAt: time.Now().Add(-time.Second)}))
	_, err = b.Session(ctx, secretHash("expired"))
	require.ErrorIs(t, err, console.ErrNoSession)
}
