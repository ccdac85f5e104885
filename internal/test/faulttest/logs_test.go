package faulttest

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

// TestTokensAndSecretsAreNeverLogged captures every log line (debug and
// up) of an instance while requests with good and bad tokens fail with
// 5xx (PostgreSQL down) and 4xx, and checks that no token, signature or
// secret appears.
func TestTokensAndSecretsAreNeverLogged(t *testing.T) {
	t.Parallel()
	logs := &apptest.SyncBuffer{}
	pg := migratedPrivatePostgres(t)
	inst := apptest.Start(t, apptest.Options{DatabaseURL: pg.URL, RedisURL: testenv.RedisURL(), App: app.Options{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}})
	id := inst.CreateActivity(t, "logs", 10)
	user := inst.Token(t, "logged-user", false)
	admin := inst.Token(t, "logged-admin", true)
	forged := user[:strings.LastIndexByte(user, '.')] + ".forgedsignature"
	pg.Stop()
	for _, tok := range []string{user, admin, forged} {
		inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", tok, `{}`, "Idempotency-Key", "k1")
		inst.MustDo(t, http.MethodPost, "/v1/activities", tok, `{"title":"x","capacity":1}`)
		inst.MustDo(t, http.MethodGet, "/v1/registrations/r_01JD0000000000000000000000", tok, nil)
	}
	inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", "", `{}`, "Authorization", "Basic c2VjcmV0OnNlY3JldA==")
	out := logs.String()
	require.Contains(t, out, "status=503", "the 5xx were logged")
	for _, secret := range []string{apptest.Secret, user, admin, forged, "forgedsignature", "c2VjcmV0OnNlY3JldA=="} {
		require.NotContains(t, out, secret)
	}
	for _, tok := range []string{user, admin} {
		sig := tok[strings.LastIndexByte(tok, '.')+1:]
		require.NotContains(t, out, sig, "no signature")
		require.NotContains(t, out, strings.Split(tok, ".")[1], "no payload")
	}
}
