package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// plAccessibleEverywhere opens each path in each language and checks it
// with axe-core.
func plAccessibleEverywhere(t *testing.T, inst *apptest.Instance, paths ...string) {
	t.Helper()
	for _, lang := range console.Languages {
		s := signInTab(t, inst, lang, "ana", "admin")
		for _, p := range paths {
			s.open(p)
			s.accessible(p + " (" + lang + ")")
		}
	}
}

// TestAPoolShowsItsActivitiesSeatsLive: an admin creates a pool through
// the form (a refused capacity shown beside its field); with two
// activities in it, its page shows both, each following its seat stream,
// and the pool's own numbers move (polled from the display tier) when
// someone signs up; the capacity is changed through the edit form. Every
// page passes axe-core in every language.
func TestAPoolShowsItsActivitiesSeatsLive(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	s := signInTab(t, inst, "en", "ana", "admin")

	s.open("/console/pools/new")
	s.fill(map[string]string{"pool-title": "Main hall", "pool-capacity": "-3"})
	s.submit("main form.stack button[type=submit]", "main h1")
	require.Contains(t, text(t, s.ctx, "#pool-capacity-error"), "capacity must be between 0 and")
	require.Equal(t, "true", attr(t, s.ctx, "#pool-capacity", "aria-invalid"))
	require.Equal(t, "Main hall", eval[string](s, `document.getElementById('pool-title').value`), "the form keeps what was typed")
	s.fill(map[string]string{"pool-capacity": "5"})
	s.submit("main form.stack button[type=submit]", "main h1")
	path := s.path()
	require.True(t, strings.HasPrefix(path, "/console/pools/p_"), path)
	poolID := strings.TrimPrefix(path, "/console/pools/")

	admin := inst.API(t, "admin", true)
	ctx := context.Background()
	var acts []string
	for _, title := range []string{"Session A", "Session B"} {
		a, err := admin.CreateActivity(ctx, client.NewActivity{Title: title, Capacity: 4, Pools: []string{poolID}})
		require.NoError(t, err)
		acts = append(acts, a.ID)
	}
	s.open(path)
	require.Equal(t, 2, countOf(t, s.ctx, "tr.pool-member[data-stream]"))
	require.Equal(t, "5", text(t, s.ctx, "#pool-seats [data-field=remaining]"))
	require.Contains(t, text(t, s.ctx, "main"), "Session A")
	first := fmt.Sprintf(`tr.pool-member[data-activity=%q]`, acts[0])
	do(t, s.ctx, 10*time.Second, waitTrue(`!!document.querySelector('`+first+`').dataset.updated`, 10*time.Second, "the first activity's stream"))

	inst.MustSignup(t, acts[0], "alice")
	do(t, s.ctx, 20*time.Second,
		waitText(first+" [data-field=taken]", "1", 10*time.Second),
		waitText("#pool-seats [data-field=taken]", "1", 15*time.Second),
		waitText("#pool-seats [data-field=remaining]", "4", 5*time.Second),
	)

	s.open(path + "/edit")
	require.Equal(t, "5", eval[string](s, `document.getElementById('pool-capacity').value`))
	s.fill(map[string]string{"pool-capacity": "7"})
	s.submit("main form.stack button[type=submit]", "main h1")
	require.Equal(t, path, s.path())
	require.Equal(t, "7", text(t, s.ctx, "#pool-seats [data-field=capacity]"))

	s.open("/console/pools")
	require.Contains(t, text(t, s.ctx, "main table"), "Main hall")
	plAccessibleEverywhere(t, inst, "/console/pools", "/console/pools/new", path, path+"/edit", path+"/seats")
}

// TestASeriesListsItsActivities: an admin creates a series through the
// form (a refused limit shown beside its field), sees the activities that
// join it on its page, and changes its limit. Every page passes axe-core
// in every language.
func TestASeriesListsItsActivities(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	s := signInTab(t, inst, "en", "ana", "admin")

	s.open("/console/series/new")
	s.fill(map[string]string{"series-title": "Spring workshops", "series-max": "0"})
	s.submit("main form.stack button[type=submit]", "main h1")
	require.Contains(t, text(t, s.ctx, "#series-max-error"), "max_per_user must be between 1 and 1000")
	require.Equal(t, "true", attr(t, s.ctx, "#series-max", "aria-invalid"))
	s.fill(map[string]string{"series-max": "2"})
	s.submit("main form.stack button[type=submit]", "main h1")
	path := s.path()
	require.True(t, strings.HasPrefix(path, "/console/series/s_"), path)
	seriesID := strings.TrimPrefix(path, "/console/series/")
	require.Equal(t, "2", text(t, s.ctx, "#series-max-per-user"))
	require.Equal(t, 0, countOf(t, s.ctx, "tr.series-member"))

	_, err := inst.API(t, "admin", true).CreateActivity(context.Background(),
		client.NewActivity{Title: "Suturing", Capacity: 8, SeriesID: seriesID})
	require.NoError(t, err)
	s.open(path)
	require.Equal(t, 1, countOf(t, s.ctx, "tr.series-member"))
	require.Contains(t, text(t, s.ctx, "tr.series-member"), "Suturing")

	s.open(path + "/edit")
	s.fill(map[string]string{"series-max": "3"})
	s.submit("main form.stack button[type=submit]", "main h1")
	require.Equal(t, path, s.path())
	require.Equal(t, "3", text(t, s.ctx, "#series-max-per-user"))
	s.open("/console/series")
	require.Contains(t, text(t, s.ctx, "main table"), "Spring workshops")
	require.Equal(t, 400, s.status("/console/series?before=nonsense"))
	plAccessibleEverywhere(t, inst, "/console/series", "/console/series/new", path, path+"/edit")
}

// TestACodeBlockShowsItsCodeOnce: an admin reserves seats for a code; the
// code is shown in the answer to the creation only (the list never shows
// it), a signup with it through the API takes a reserved seat, a block
// larger than the free seats is refused beside the form, and deleting the
// block returns its seats. Every page passes axe-core in every language.
func TestACodeBlockShowsItsCodeOnce(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateActivity(t, "Grand rounds", 4)
	s := signInTab(t, inst, "en", "ana", "admin")
	path := "/console/activities/" + act + "/blocks"

	s.open(path)
	require.Equal(t, 0, countOf(t, s.ctx, "tr.block"))
	s.fill(map[string]string{"block-seats": "2"})
	s.submit("main form.stack button[type=submit]", "main h1")
	code := strings.TrimSpace(text(t, s.ctx, "#block-code"))
	require.Len(t, code, 10, "a random code when none is typed")
	require.Equal(t, 1, countOf(t, s.ctx, "tr.block"))
	require.NotContains(t, text(t, s.ctx, "#blocks"), code, "the list never shows a code")
	s.accessible("the new block's code")

	s.open(path)
	require.Equal(t, 0, countOf(t, s.ctx, "#block-code"))
	require.NotContains(t, eval[string](s, `document.documentElement.outerHTML`), code, "shown once")
	require.Equal(t, 1, countOf(t, s.ctx, "tr.block"))

	res, err := inst.API(t, "speaker", false).Signup(context.Background(), act, client.SignupOptions{Code: code})
	require.NoError(t, err)
	require.NotNil(t, res.Registration.BlockID, "the seat comes from the block")

	s.fill(map[string]string{"block-seats": "3", "block-code-input": "SPEAKERS-27"})
	s.submit("main form.stack button[type=submit]", "main h1")
	require.NotEmpty(t, text(t, s.ctx, "#block-form-error"), "two seats are free: the domain's refusal")
	require.Equal(t, 1, countOf(t, s.ctx, "tr.block"))
	require.Equal(t, "SPEAKERS-27", eval[string](s, `document.getElementById('block-code-input').value`))

	plAccessibleEverywhere(t, inst, path)
	s.open(path) // a fresh page, with the token of the session the browser holds now
	s.submit("tr.block button.danger", "main h1")
	require.Equal(t, path, s.path())
	require.Equal(t, 0, countOf(t, s.ctx, "tr.block"))
	seats, err := inst.Public().Seats(context.Background(), act)
	require.NoError(t, err)
	require.Equal(t, 3, seats.Remaining, "the block's unused seat returned to the public")
}

// TestADoorRoleIsRefusedThePoolsOnSaleAndWebhooksPages: a door-role
// session gets 403 on every page of this area, and on its forms.
func TestADoorRoleIsRefusedThePoolsOnSaleAndWebhooksPages(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	act := inst.CreateActivity(t, "Grand rounds", 4)
	door := signInTab(t, inst, "en", "dan", "door-a")
	for _, path := range []string{"/console/pools", "/console/pools/new", "/console/pools/p_01JDQ8Y4K2M7N3P5R6S8T9V0W1",
		"/console/pools/p_01JDQ8Y4K2M7N3P5R6S8T9V0W1/seats", "/console/series", "/console/series/new",
		"/console/series/s_01JDQ8X2T5V7W9Y1Z3A5C7E9G1", "/console/activities/" + act + "/blocks",
		"/console/activities/" + act + "/onsale", "/console/activities/" + act + "/onsale/numbers",
		"/console/webhooks", "/console/webhooks/new", "/console/webhooks/wh_01JDQ95F0A2S4D6F8G0H2J4K6L",
		"/console/webhooks/wh_01JDQ95F0A2S4D6F8G0H2J4K6L/deliveries/ev_x"} {
		require.Equal(t, 403, door.status(path), path)
	}
	csrf := attr(t, door.ctx, "body", "data-csrf")
	for _, path := range []string{"/console/pools", "/console/series", "/console/activities/" + act + "/blocks", "/console/webhooks"} {
		n := eval[int](door, fmt.Sprintf(`fetch(%q, {method: 'POST', headers: {'X-CSRF-Token': %q}, body: new URLSearchParams({title: 'x'})}).then(r => r.status)`, path, csrf))
		require.Equal(t, 403, n, path)
	}
}
