package loadtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSignupCostTargets: the signup's cost targets are judged from the
// processor time per operation of trivial, signup_hot and production in
// one run, and are unmeasured (not met or failed) when a scenario is
// missing.
func TestSignupCostTargets(t *testing.T) {
	t.Parallel()
	r := sampleReport()
	r.Scenarios[ScenarioTrivial] = &ScenarioResult{RPS: 20000, Ops: 200000,
		CPUMicrosPerOp: map[string]float64{CPUMachine: 80, CPUCapacityd: 40}}
	r.Scenarios[ScenarioSignupHot].CPUMicrosPerOp = map[string]float64{CPUMachine: 400, CPUCapacityd: 200, CPUPostgres: 80}
	r.ComputeRatios()
	require.InDelta(t, 5.0, *r.Ratios[RatioSignupHotCPUVsTrivial], 1e-9)
	require.InDelta(t, 5.0, *r.Ratios[RatioSignupHotMachineVsTrivial], 1e-9)

	byWhat := targetsByWhat(t, r)
	require.False(t, *byWhat["capacityd's processor time per hot signup vs per trivial request"].Met, "5× is over 3×")
	require.False(t, *byWhat["the machine's processor time per hot signup vs per trivial request"].Met, "5× is over 3.5×")
	prodRate := "production signups/s (RS256 tokens, access log, two webhooks, a waiting list) vs hot signups/s"
	prodCost := "capacityd and PostgreSQL per production signup vs per hot signup"
	require.Nil(t, byWhat[prodRate].Met, "production did not run")
	require.Nil(t, byWhat[prodCost].Met, "production did not run")

	r.Scenarios[ScenarioProduction] = &ScenarioResult{RPS: 2600, Ops: 26000,
		CPUMicrosPerOp: map[string]float64{CPUMachine: 700, CPUCapacityd: 430, CPUPostgres: 150}}
	r.ComputeRatios()
	byWhat = targetsByWhat(t, r)
	require.True(t, *byWhat[prodRate].Met, "0.65 meets ≥ 0.6")
	require.False(t, *byWhat[prodCost].Met, "580 ÷ 280 is over 2")
}
