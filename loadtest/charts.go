package loadtest

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart file names, under the chart directory.
const (
	ThroughputChart = "throughput.png"
	LatencyChart    = "latency.png"
)

var (
	scenarioColor = color.RGBA{R: 0x2b, G: 0x6c, B: 0xb0, A: 0xff}
	baselineColor = color.RGBA{R: 0xa0, G: 0xa0, B: 0xa0, A: 0xff}
	pColors       = []color.Color{
		color.RGBA{R: 0x4c, G: 0xa3, B: 0xdd, A: 0xff},
		color.RGBA{R: 0xf0, G: 0xa2, B: 0x02, A: 0xff},
		color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	}
)

// throughputBar is one bar of the throughput chart.
type throughputBar struct {
	label    string
	value    float64
	baseline bool
}

// throughputBars returns the scenarios' rps and the baselines' tps, in
// page order (baselines that are not rates are left out).
func throughputBars(r *Report) []throughputBar {
	var bars []throughputBar
	for _, n := range orderedScenarios(r) {
		if s := r.Scenarios[n]; s.Ops > 0 && n != ScenarioSSEFanout {
			bars = append(bars, throughputBar{label: n, value: s.RPS})
		}
	}
	for _, k := range sortedKeys(r.Baselines) {
		if v := r.Baselines[k]; v != nil && strings.Contains(k, "_tps_") {
			bars = append(bars, throughputBar{label: k, value: *v, baseline: true})
		}
	}
	return bars
}

// WriteCharts draws the throughput and latency charts as PNGs into dir.
func WriteCharts(dir string, r *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	if err := throughputChart(filepath.Join(dir, ThroughputChart), r); err != nil {
		return err
	}
	return latencyChart(filepath.Join(dir, LatencyChart), r)
}

func throughputChart(file string, r *Report) error {
	bars := throughputBars(r)
	p := plot.New()
	p.Title.Text = "Throughput: HTTP scenarios (req/s, blue) and PostgreSQL baselines (tps, grey)"
	p.X.Label.Text = "operations per second"
	p.X.Min = 0
	names := make([]string, len(bars))
	for i, b := range bars {
		// Bottom to top: reverse so the first bar is at the top.
		j := len(bars) - 1 - i
		names[j] = b.label
		vals := make(plotter.Values, len(bars))
		vals[j] = b.value
		bc, err := plotter.NewBarChart(vals, vg.Points(12))
		if err != nil {
			return fmt.Errorf("loadtest: chart: %w", err)
		}
		bc.Horizontal = true
		bc.LineStyle.Width = 0
		bc.Color = scenarioColor
		if b.baseline {
			bc.Color = baselineColor
		}
		p.Add(bc)
	}
	if len(bars) > 0 {
		p.NominalY(names...)
		top := 0.0
		for _, b := range bars {
			top = max(top, b.value)
		}
		p.X.Max = top * 1.08
	}
	p.Add(plotter.NewGrid())
	h := vg.Length(len(bars))*vg.Points(20) + vg.Inch
	if err := p.Save(9*vg.Inch, h, file); err != nil {
		return fmt.Errorf("loadtest: save %s: %w", file, err)
	}
	return nil
}

func latencyChart(file string, r *Report) error {
	var names []string
	var series [3]plotter.Values
	top := 0.0
	for _, n := range orderedScenarios(r) {
		s := r.Scenarios[n]
		if s.Ops == 0 {
			continue
		}
		top = max(top, s.P99MS)
		names = append(names, n)
		for i, v := range []float64{s.P50MS, s.P95MS, s.P99MS} {
			series[i] = append(series[i], v)
		}
	}
	p := plot.New()
	p.Title.Text = "Latency percentiles by scenario (ms)"
	p.Y.Label.Text = "milliseconds"
	p.Y.Min = 0
	p.Legend.Top = true
	w := vg.Points(10)
	for i, label := range []string{"p50", "p95", "p99"} {
		if len(names) == 0 {
			break
		}
		bc, err := plotter.NewBarChart(series[i], w)
		if err != nil {
			return fmt.Errorf("loadtest: chart: %w", err)
		}
		bc.LineStyle.Width = 0
		bc.Color = pColors[i]
		bc.Offset = vg.Length(i-1) * w
		p.Add(bc)
		p.Legend.Add(label, bc)
	}
	if len(names) > 0 {
		p.NominalX(names...)
		p.X.Tick.Label.Rotation = 0.6
		p.X.Tick.Label.XAlign = draw.XRight
		p.Y.Max = top * 1.12
	}
	p.Add(plotter.NewGrid())
	if err := p.Save(10*vg.Inch, 5*vg.Inch, file); err != nil {
		return fmt.Errorf("loadtest: save %s: %w", file, err)
	}
	return nil
}
