package e2e

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

func TestOneUserManyConcurrentSignupsGetsOneRow(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "dupes", 10)
	eager := inst.API(t, "eager", false)

	type answer struct {
		res client.SignupResult
		err error
	}
	var wg sync.WaitGroup
	answers := make([]answer, 30)
	for i := range answers {
		wg.Go(func() {
			res, err := eager.Signup(t.Context(), id, client.SignupOptions{})
			answers[i] = answer{res, err}
		})
	}
	wg.Wait()
	created, ids := 0, map[string]bool{}
	for _, a := range answers {
		var e *client.Error
		switch {
		case a.err == nil && !a.res.Waitlisted:
			created++
			ids[a.res.Registration.ID] = true
		case errors.As(a.err, &e) && e.Status == http.StatusConflict:
			// The user's own requests in flight hold display seats, so the
			// gate may call the activity full; the authority, asked before
			// any refusal, says already_registered.
			require.Equal(t, client.CodeAlreadyRegistered, e.Code, "never activity_full while 9 seats are free")
			ids[e.RegistrationID] = true
		default:
			t.Fatalf("unexpected %+v %v", a.res, a.err)
		}
	}
	require.Equal(t, 1, created)
	require.Len(t, ids, 1, "every conflict names the one registration")
	require.Equal(t, 1, inst.AuthorityTaken(t, id))
	require.Equal(t, 1, displayTaken(t, inst, id))
}

// TestIdempotencyKeyReplaysTheFirstOutcome sends its signups as they are:
// it compares replayed answers byte for byte and reads
// Idempotent-Replayed.
func TestIdempotencyKeyReplaysTheFirstOutcome(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "idem", 1)
	body := `{"metadata":{"diet":"vegan","seat":"aisle"}}`
	tok := inst.Token(t, "ann", false)
	post := func(key, body string) apptest.Response {
		return inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", tok, body, "Idempotency-Key", key)
	}

	first := post("k-1", body)
	require.Equal(t, http.StatusCreated, first.Status)
	require.Empty(t, first.Header.Get("Idempotent-Replayed"))
	var reg client.Registration
	first.JSON(t, &reg)
	require.JSONEq(t, `{"diet":"vegan","seat":"aisle"}`, string(reg.Metadata))

	again := post("k-1", body)
	require.Equal(t, http.StatusCreated, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.Body), string(again.Body), "same body, byte for byte")

	conflict := post("k-1", `{"metadata":{"diet":"none"}}`)
	require.Equal(t, http.StatusConflict, conflict.Status)
	require.Equal(t, "idempotency_conflict", conflict.ErrorCode())

	// A refusal is an outcome too: replayed the same, even after a seat frees up.
	bob := inst.Token(t, "bob", false)
	full := inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", bob, "{}", "Idempotency-Key", "b-1")
	require.Equal(t, "activity_full", full.ErrorCode())
	_, err := inst.API(t, "ann", false).CancelRegistration(t.Context(), reg.ID)
	require.NoError(t, err)
	fullAgain := inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", bob, "{}", "Idempotency-Key", "b-1")
	require.Equal(t, http.StatusConflict, fullAgain.Status)
	require.Equal(t, "true", fullAgain.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(full.Body), string(fullAgain.Body))

	// The same key of another user is another key.
	other := inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", inst.Token(t, "cy", false), "{}", "Idempotency-Key", "k-1")
	require.Equal(t, http.StatusCreated, other.Status)
	require.Empty(t, other.Header.Get("Idempotent-Replayed"))

	for _, bad := range []string{"", strings.Repeat("k", 256), "tab\there", "naïve"} {
		r := post(bad, "{}")
		require.Equal(t, http.StatusBadRequest, r.Status, "key %q", bad)
	}
}

// TestConcurrentFirstUsesOfOneKeyMakeOneRow compares the answers byte for
// byte: its signups are sent as they are.
func TestConcurrentFirstUsesOfOneKeyMakeOneRow(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	id := inst.CreateActivity(t, "idem race", 10)
	tok := inst.Token(t, "racer", false)

	var wg sync.WaitGroup
	responses := make([]apptest.Response, 20)
	for i := range responses {
		wg.Go(func() {
			responses[i] = inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", tok, `{"metadata":{"n":1}}`, "Idempotency-Key", "same")
		})
	}
	wg.Wait()
	replayed := 0
	for _, r := range responses {
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		require.Equal(t, string(responses[0].Body), string(r.Body))
		if r.Header.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
	}
	require.Equal(t, 19, replayed)
	require.Equal(t, 1, inst.AuthorityTaken(t, id))
	require.Equal(t, 1, displayTaken(t, inst, id))
}
