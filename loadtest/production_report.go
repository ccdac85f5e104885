package loadtest

import "fmt"

// serviceCPU returns the processor time per operation of capacityd and
// PostgreSQL of a scenario, in microseconds.
func (r *Report) serviceCPU(scenario string) (float64, bool) {
	s := r.Scenarios[scenario]
	if s == nil || s.CPUMicrosPerOp == nil {
		return 0, false
	}
	return s.CPUMicrosPerOp[CPUCapacityd] + s.CPUMicrosPerOp[CPUPostgres], true
}

// computeProductionCost fills the checks and the ratio (null when
// unmeasured) of what production's options cost capacityd and PostgreSQL
// per signup, beside signup_hot.
func (r *Report) computeProductionCost() {
	var prod, hot *float64
	if v, ok := r.serviceCPU(ScenarioProduction); ok {
		prod, r.Checks[CheckProductionCPU] = &v, v
	}
	if v, ok := r.serviceCPU(ScenarioSignupHot); ok {
		hot, r.Checks[CheckSignupHotCPU] = &v, v
	}
	if prod != nil && hot != nil {
		r.Checks[CheckProductionCPUAdded] = *prod - *hot
	}
	r.Ratios[RatioProductionServiceCPU] = ratio(prod, hot)
	r.Ratios[RatioSignupHotCPUVsTrivial] = ratio(r.cpuPerOp(ScenarioSignupHot, CPUCapacityd), r.cpuPerOp(ScenarioTrivial, CPUCapacityd))
	r.Ratios[RatioSignupHotMachineVsTrivial] = ratio(r.cpuPerOp(ScenarioSignupHot, CPUMachine), r.cpuPerOp(ScenarioTrivial, CPUMachine))
}

// cpuPerOp returns the processor time per operation of one process group
// (CPUCapacityd, CPUMachine, …) in a scenario, or nil when unmeasured.
func (r *Report) cpuPerOp(scenario, group string) *float64 {
	s := r.Scenarios[scenario]
	if s == nil {
		return nil
	}
	v, ok := s.CPUMicrosPerOp[group]
	if !ok || v <= 0 {
		return nil
	}
	return &v
}

// productionCostLine is the sentence under the processor-time table that
// says what production's options cost beside signup_hot; empty when
// either is unmeasured.
func productionCostLine(r *Report) string {
	prod, okProd := checkNumber(r.Checks[CheckProductionCPU])
	hot, okHot := checkNumber(r.Checks[CheckSignupHotCPU])
	if !okProd || !okHot || hot == 0 {
		return ""
	}
	return fmt.Sprintf("A real deployment's options (%s: RS256 tokens, access log, two webhooks, a waiting list) cost capacityd and PostgreSQL "+
		"%.0f µs per signup against %.0f in %s: %s×.\n", ScenarioProduction, prod, hot, ScenarioSignupHot, trimFloat(round(prod/hot, 2)))
}
