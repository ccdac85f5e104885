package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/registration"
)

// TestARequestItsClientAbandonedIsNoFailure: a read cut short because its
// client went away ends in an unavailable error, which is logged at debug
// level, not as a failure of the service; one that fails with its client
// still there is logged as one.
func TestARequestItsClientAbandonedIsNoFailure(t *testing.T) {
	t.Parallel()
	logs := &apptest.SyncBuffer{}
	started := make(chan struct{}, 1)
	e := startEdge(t, func(c *httpapi.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.Seats = func(ctx context.Context, id string) (registration.Seats, error) {
			if id == "a_01J00000000000000000000002" {
				return registration.Seats{}, capacityd.Unavailable(nil, "the database is unavailable")
			}
			started <- struct{}{}
			<-ctx.Done()
			return registration.Seats{}, capacityd.Unavailable(ctx.Err(), "the database is unavailable")
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/v1/activities/a_01J00000000000000000000001/seats", nil)
	require.NoError(t, err)
	go func() { <-started; cancel() }()
	_, err = http.DefaultClient.Do(req)
	require.Error(t, err)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "request abandoned by the client") },
		5*time.Second, 10*time.Millisecond)

	r := e.do(t, http.MethodGet, "/v1/activities/a_01J00000000000000000000002/seats", "", nil)
	assert.Equal(t, http.StatusServiceUnavailable, r.Status)
	assert.Equal(t, 1, strings.Count(logs.String(), `"msg":"request failed"`), "only the failure with its client there: %s", logs.String())
}
