package loadtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi"
)

// The identity provider's tokens pass the service's own check against the
// JWK Set it serves, with the iss and aud production configures.
func TestIdentityProviderTokensPassTheServiceCheck(t *testing.T) {
	t.Parallel()
	idp, err := startIdentityProvider()
	require.NoError(t, err)
	t.Cleanup(idp.close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	auth, err := httpapi.NewTokenAuthenticator(ctx, httpapi.TokenConfig{JWKSURL: idp.jwksURL, Issuer: idpIssuer, Audience: idpAudience})
	require.NoError(t, err)

	toks, err := idp.signMany(5, func(i int) string { return []string{"a", "b", "c", "d", "e"}[i] }, time.Hour)
	require.NoError(t, err)
	require.Len(t, toks, 5)
	for i, tok := range toks {
		caller, err := auth.Verify(tok)
		require.NoError(t, err)
		require.Equal(t, string(rune('a'+i)), caller.UserID, "the i-th token is the i-th user's")
		require.False(t, caller.Admin)
	}
	admin, err := idp.sign("loadtest-admin", true, time.Hour)
	require.NoError(t, err)
	caller, err := auth.Verify(admin)
	require.NoError(t, err)
	require.True(t, caller.Admin)

	// Another issuer's tokens are refused: the check is really made.
	other, err := httpapi.NewTokenAuthenticator(ctx, httpapi.TokenConfig{JWKSURL: idp.jwksURL, Issuer: "https://elsewhere.invalid/"})
	require.NoError(t, err)
	_, err = other.Verify(toks[0])
	require.Error(t, err)

	env := strings.Join(productionEnv(idp), " ")
	for _, want := range []string{"JWT_JWKS_URL=" + idp.jwksURL, "JWT_ISSUER=" + idpIssuer, "JWT_AUDIENCE=" + idpAudience, "LOG_LEVEL=info"} {
		require.Contains(t, env, want)
	}
}

func TestProductionSizes(t *testing.T) {
	t.Parallel()
	hot := &ScenarioResult{RPS: 4000, Ops: 40000}
	free, tokens := productionSizes(hot, 10*time.Second)
	require.Equal(t, 3000, free, "a quarter of 0.3 × 4,000/s for 10 s")
	require.Equal(t, 40000, tokens, "as many as signup_hot's signups in as long")
	free, tokens = productionSizes(nil, 3*time.Second)
	require.Equal(t, 450, free, "a quarter of 0.3 × 2,000/s for 3 s without signup_hot")
	require.Equal(t, 6000, tokens)
	free2, tokens2 := productionSizes(&ScenarioResult{Note: "skipped"}, 3*time.Second)
	require.Equal(t, [2]int{free, tokens}, [2]int{free2, tokens2}, "a signup_hot that made nothing is none")
	free, tokens = productionSizes(hot, time.Microsecond)
	require.Equal(t, 1, free, "at least one seat")
	require.Equal(t, 2*productionWarmups, tokens, "at least twice the warm-up's tokens")
}

func TestProductionCost(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.Scenarios[ScenarioSignupHot].CPUMicrosPerOp = map[string]float64{CPUMachine: 400, CPUCapacityd: 200, CPUPostgres: 70, CPULoadTest: 90}
	r.Scenarios[ScenarioProduction] = &ScenarioResult{RPS: 1600, Ops: 16000,
		CPUMicrosPerOp: map[string]float64{CPUMachine: 1000, CPUCapacityd: 420, CPUPostgres: 120, CPULoadTest: 300}}
	r.ComputeRatios()
	require.InDelta(t, 0.4, *r.Ratios[RatioProductionVsSignupHot], 1e-9)
	require.EqualValues(t, 540, r.Checks[CheckProductionCPU], "capacityd and PostgreSQL, not the load test")
	require.EqualValues(t, 270, r.Checks[CheckSignupHotCPU])
	require.EqualValues(t, 270, r.Checks[CheckProductionCPUAdded])
	require.InDelta(t, 2, *r.Ratios[RatioProductionServiceCPU], 1e-9)

	var page strings.Builder
	require.NoError(t, WriteMarkdown(&page, r, MarkdownMeta{Scale: QuickScale}))
	md := page.String()
	require.Contains(t, md, "| production | "+productionDescription)
	require.Contains(t, md, "cost capacityd and PostgreSQL 540 µs per signup against 270 in signup_hot: 2×")
	table := md[strings.Index(md, "## HTTP scenarios"):]
	require.Less(t, strings.Index(table, "| signup_hot |"), strings.Index(table, "| production |"), "beside signup_hot")
	require.Less(t, strings.Index(table, "| production |"), strings.Index(table, "| signup_hot_256 |"), "beside signup_hot")

	delete(r.Scenarios, ScenarioProduction)
	r2 := NewReport("x")
	r2.Scenarios = r.Scenarios
	r2.ComputeRatios()
	require.Contains(t, r2.Ratios, RatioProductionServiceCPU)
	require.Nil(t, r2.Ratios[RatioProductionServiceCPU], "no production in the run")
	require.NotContains(t, r2.Checks, CheckProductionCPUAdded)
	require.Empty(t, productionCostLine(r2))
}
