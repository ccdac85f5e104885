// Package loadtest measures capacityd side by side with what PostgreSQL
// alone does on the same machine.
//
// It has three parts: a dataset (Seed), baselines that drive
// PostgreSQL directly through pgx like pgbench scripts
// (RunBaselines, CheckCount), and service scenarios that drive a capacityd
// over HTTP (the scenario_*.go files). Run ties them together and returns a
// Report, which WriteJSON, WriteMarkdown and WriteCharts render. Every
// figure in a Report is measured; nothing is hard-coded.
package loadtest
