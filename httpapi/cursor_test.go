package httpapi_test

import (
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/client"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// requirePublicCursor checks that a page's cursor is the base64url of the
// public id of its last item, and nothing else.
func requirePublicCursor(t *testing.T, cursor *string, lastID string) {
	t.Helper()
	require.NotNil(t, cursor)
	b, err := base64.RawURLEncoding.DecodeString(*cursor)
	require.NoError(t, err)
	require.Equal(t, lastID, string(b), "the cursor names the page's last item by its public id")
}

// TestCursorsNameThePageLastItemByItsPublicID pages through the three
// paged listings: every cursor carries the public id of its page's last
// item (no internal row number, which would tell the service's volume),
// and following them yields every item once, in order.
func TestCursorsNameThePageLastItemByItsPublicID(t *testing.T) {
	t.Parallel()
	inst := apptest.Start(t, apptest.Options{})
	ctx := t.Context()
	admin := inst.API(t, "admin", true)

	var acts []string // newest first
	for i := range 3 {
		acts = append([]string{inst.CreateActivity(t, fmt.Sprint("paged ", i), 10)}, acts...)
	}
	var regs []string // of acts[0], in creation order
	for i := range 5 {
		regs = append(regs, inst.MustSignup(t, acts[0], fmt.Sprint("user-", i)).ID)
	}
	var mine []string // of user-0, newest first
	mine = append(mine, regs[0])
	for _, a := range acts[1:] {
		mine = append([]string{inst.MustSignup(t, a, "user-0").ID}, mine...)
	}
	// Registrations of others in between: they must not show.
	inst.MustSignup(t, acts[1], "user-9")

	var got []string
	cursor := ""
	for {
		p, err := admin.ListRegistrations(ctx, acts[0], client.RegistrationListOptions{Limit: 2, Cursor: cursor})
		require.NoError(t, err)
		for _, r := range p.Items {
			got = append(got, r.ID)
		}
		if p.NextCursor == nil {
			break
		}
		requirePublicCursor(t, p.NextCursor, p.Items[len(p.Items)-1].ID)
		cursor = *p.NextCursor
	}
	require.Equal(t, regs, got)

	got, cursor = nil, ""
	user := inst.API(t, "user-0", false)
	for {
		p, err := user.MyRegistrations(ctx, client.ListOptions{Limit: 2, Cursor: cursor})
		require.NoError(t, err)
		for _, r := range p.Items {
			got = append(got, r.ID)
		}
		if p.NextCursor == nil {
			break
		}
		requirePublicCursor(t, p.NextCursor, p.Items[len(p.Items)-1].ID)
		cursor = *p.NextCursor
	}
	require.Equal(t, mine, got)

	got, cursor = nil, ""
	for {
		p, err := admin.ListActivities(ctx, client.ListOptions{Limit: 2, Cursor: cursor})
		require.NoError(t, err)
		for _, a := range p.Items {
			got = append(got, a.ID)
		}
		if p.NextCursor == nil {
			break
		}
		requirePublicCursor(t, p.NextCursor, p.Items[len(p.Items)-1].ID)
		cursor = *p.NextCursor
	}
	require.Equal(t, acts, got)

	// Another user's cursor names nothing of one's own listing.
	_, err := inst.API(t, "user-1", false).MyRegistrations(ctx, client.ListOptions{Cursor: base64.RawURLEncoding.EncodeToString([]byte(mine[0]))})
	require.Equal(t, 400, apptest.Refusal(t, err).Status)
	// Another activity's registration names nothing of this one's.
	_, err = admin.ListRegistrations(ctx, acts[0], client.RegistrationListOptions{Cursor: base64.RawURLEncoding.EncodeToString([]byte(mine[0]))})
	require.Equal(t, 400, apptest.Refusal(t, err).Status)
}
