package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/registration"
)

// badRequestIDs are X-Request-Id values a client may send that the
// service must not keep: bytes PostgreSQL refuses, control characters,
// spaces (prose for someone else's event), and more than 64 characters.
var badRequestIDs = []string{
	"\xff", "bad\xfe\xff", "tab\tid", "your seat was revoked, pay at https://evil.example/",
	strings.Repeat("x", registration.MaxRequestIDLen+1),
}

// The review's reproduction: while 6,000 users sign up on two instances,
// offenders loop cancels and signups of their own with request ids the
// database refuses. None of the others fails; each offender's request is
// answered as if its id were well-formed, with one of the service's own.
func TestPoisonedRequestIDsFailNobodyElsesSignup(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, apptest.Options{})
	b := apptest.Start(t, apptest.Options{DatabaseURL: a.DatabaseURL})
	insts := []*apptest.Instance{a, b}
	crowd := []string{a.CreateActivity(t, "crowd-1", 2500), a.CreateActivity(t, "crowd-2", 2500), a.CreateActivity(t, "crowd-3", 1000)}
	own := a.CreateActivity(t, "offenders", 100)

	stop := make(chan struct{})
	var offended atomic.Int64
	var wg sync.WaitGroup
	for o := range 8 {
		wg.Go(func() {
			inst := insts[o%2]
			token := inst.Token(t, fmt.Sprintf("mallory-%d", o), false)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				bad := badRequestIDs[i%len(badRequestIDs)]
				r, err := apptest.Do(http.MethodPost, inst.URL+"/v1/activities/"+own+"/registrations", token, "{}", "X-Request-Id", bad)
				if err != nil {
					t.Errorf("offender's signup: %v", err)
					return
				}
				require.NotEqual(t, bad, r.Header.Get("X-Request-Id"), "a malformed request id is replaced")
				if r.Status == http.StatusTooManyRequests {
					continue
				}
				require.Contains(t, []int{http.StatusCreated, http.StatusConflict}, r.Status, "offender's signup: %s", r.Body)
				var reg client.Registration
				if r.Status == http.StatusConflict {
					e := r.ErrorCode()
					require.Equal(t, client.CodeAlreadyRegistered, e, "offender's signup: %s", r.Body)
					var body struct {
						Error struct {
							RegistrationID string `json:"registration_id"`
						} `json:"error"`
					}
					r.JSON(t, &body)
					reg.ID = body.Error.RegistrationID
				} else {
					r.JSON(t, &reg)
				}
				c, err := apptest.Do(http.MethodPost, inst.URL+"/v1/registrations/"+reg.ID+"/cancel", token, nil, "X-Request-Id", bad)
				if err != nil {
					t.Errorf("offender's cancel: %v", err)
					return
				}
				require.Equal(t, http.StatusOK, c.Status, "offender's cancel: %s", c.Body)
				require.NotEqual(t, bad, c.Header.Get("X-Request-Id"))
				offended.Add(2)
			}
		})
	}
	// The crowd: 6,000 signups, 256 in flight, spread over the two
	// instances and three activities (the third fills up).
	counts := make([]map[int]int, len(crowd))
	var mu sync.Mutex
	var crowdWG sync.WaitGroup
	sem := make(chan struct{}, 256)
	for i := range 6000 {
		k := i % len(crowd)
		api := insts[i%2].API(t, fmt.Sprintf("c%d", i), false)
		sem <- struct{}{}
		crowdWG.Go(func() {
			defer func() { <-sem }()
			status := apptest.SignupStatus(api.Signup(t.Context(), crowd[k], client.SignupOptions{}))
			mu.Lock()
			defer mu.Unlock()
			if counts[k] == nil {
				counts[k] = map[int]int{}
			}
			counts[k][status]++
		})
	}
	crowdWG.Wait()
	close(stop)
	wg.Wait()

	require.Equal(t, map[int]int{http.StatusCreated: 2000}, counts[0], "crowd 1: every signup admitted")
	require.Equal(t, map[int]int{http.StatusCreated: 2000}, counts[1], "crowd 2: every signup admitted")
	require.Equal(t, map[int]int{http.StatusCreated: 1000, http.StatusConflict: 1000}, counts[2], "crowd 3: exactly its capacity admitted")
	require.Positive(t, offended.Load(), "the offenders' requests reached the service")
	t.Logf("offenders' signups and cancels answered during the crowd: %d", offended.Load())

	// Nothing the offenders chose was kept: their events carry the
	// service's request ids.
	f := feed(t, a, own, client.EventFeedOptions{Limit: 500})
	require.NotEmpty(t, f.Items)
	for _, e := range f.Items {
		id := requestID(e)
		require.True(t, registration.ValidRequestID(id), "event %d's request id %q", e.Seq, id)
		require.NotContains(t, badRequestIDs, id)
	}
}

// A request id of a million characters is neither stored, nor echoed, nor
// sent on: the request gets one of the service's own. A well-formed one is
// kept as sent.
func TestRequestIDsAreKeptOnlyWhenWellFormed(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "ids", 5)
	token := inst.Token(t, "ann", false)
	huge := strings.Repeat("r", 1_000_000)
	r := inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", token, "{}", "X-Request-Id", huge)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	got := r.Header.Get("X-Request-Id")
	require.True(t, registration.ValidRequestID(got), "the service's own id, got %d characters", len(got))

	good := "trace-0123456789abcdef:span/7"
	token = inst.Token(t, "bob", false)
	r = inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", token, "{}", "X-Request-Id", good)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	require.Equal(t, good, r.Header.Get("X-Request-Id"))

	f := feed(t, inst, id, client.EventFeedOptions{})
	require.Len(t, f.Items, 2)
	require.Equal(t, got, requestID(f.Items[0]))
	require.Equal(t, good, requestID(f.Items[1]))
}
