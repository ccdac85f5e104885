// Package loadtest reproduces the seed articles' figures and measures
// capacityd side by side with them on the same machine.
//
// It has three parts: a seed-scale dataset (Seed), baselines that drive
// PostgreSQL directly through pgx like the seeds' pgbench scripts
// (RunBaselines, CheckCount), and service scenarios that drive a capacityd
// over HTTP (the scenario_*.go files). Run ties them together and returns a
// Report, which WriteJSON, WriteMarkdown and WriteCharts render. Every
// figure in a Report is measured; nothing is hard-coded.
package loadtest
