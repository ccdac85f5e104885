package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/physiciansnet/capacityd/loadtest"
)

// runFlags are the settings of loadtest run.
type runFlags struct {
	db, redis, url, naiveURL, secret string
	capacityd, buildDir              string
	jsonOut, markdown, charts        string
	only                             string
	quick                            bool
	scenario, baseline               time.Duration
	doorDevices                      int
}

func parseRunFlags(args []string, getenv func(string) string, stderr io.Writer) (runFlags, error) {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.db, "db", benchDatabaseURL(getenv), "seeded bench database URL")
	fs.StringVar(&f.redis, "redis", benchRedisURL(getenv), "bench Redis URL (its logical database is flushed when the run starts capacityd)")
	fs.StringVar(&f.url, "url", "", "measure this running capacityd (127.0.0.1 only) instead of starting one; needs -secret")
	fs.StringVar(&f.naiveURL, "naive-url", "", "with -url: a capacityd running with NOTE_COMBINING=off, for views_naive")
	fs.StringVar(&f.secret, "secret", getenv("BENCH_JWT_SECRET"), "CAPACITY_JWT_SECRET of the -url service (default: a random one for the started service)")
	fs.StringVar(&f.capacityd, "capacityd", "", "a built capacityd binary (default: build one into -build-dir)")
	fs.StringVar(&f.buildDir, "build-dir", filepath.Join(".data", "bench"), "where to build capacityd")
	fs.StringVar(&f.jsonOut, "json", "", "write the report as JSON to this file")
	fs.StringVar(&f.markdown, "markdown", "", "write the report page (BENCHMARKS.md) to this file")
	fs.StringVar(&f.charts, "charts", "", "write PNG charts into this directory (linked from -markdown)")
	fs.StringVar(&f.only, "only", "", "comma-separated steps to run (baselines, count, scenario names); default all")
	fs.BoolVar(&f.quick, "quick", false, "short runs (the bench-quick durations and sizes; without -only, leaves out "+
		strings.Join(loadtest.QuickSkips, ", ")+")")
	fs.DurationVar(&f.scenario, "scenario-duration", 0, "duration of each HTTP scenario (default 10s, -quick 3s)")
	fs.DurationVar(&f.baseline, "baseline-duration", 0, "duration of each pgx baseline (default 5s, -quick 2s)")
	fs.IntVar(&f.doorDevices, "door-devices", loadtest.FullSizes.DoorDevices,
		"devices scanning at once in door_rush (another number than the default changes the scenario's shape, and its report says so)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if err := loadtest.ValidateDoorDevices(f.doorDevices); err != nil {
		return f, fmt.Errorf("-door-devices: %w", err)
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if f.url != "" && f.secret == "" {
		return f, errors.New("-url needs -secret (the service's CAPACITY_JWT_SECRET) to sign tokens")
	}
	if f.scenario == 0 {
		f.scenario = map[bool]time.Duration{false: 10 * time.Second, true: 3 * time.Second}[f.quick]
	}
	if f.baseline == 0 {
		f.baseline = map[bool]time.Duration{false: 5 * time.Second, true: 2 * time.Second}[f.quick]
	}
	return f, nil
}

func runCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f, err := parseRunFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	started := time.Now()
	report, runErr := loadtest.Run(ctx, f.config(stdout))
	if report == nil {
		return runErr
	}
	if err := writeOutputs(ctx, f, report, started); err != nil {
		return errors.Join(runErr, err)
	}
	printTargets(stdout, report)
	return runErr
}

// config is the run the flags ask for: a quick run has the quick sizes
// and, unless -only names its steps, leaves out loadtest.QuickSkips.
func (f runFlags) config(log io.Writer) loadtest.Config {
	cfg := loadtest.Config{
		DatabaseURL: f.db, RedisURL: f.redis, ServiceURL: f.url, NaiveURL: f.naiveURL, Secret: f.secret,
		Binary: f.capacityd, BuildDir: f.buildDir, ScenarioDuration: f.scenario, BaselineDuration: f.baseline,
		Log: log,
	}
	if f.only != "" {
		cfg.Only = strings.Split(f.only, ",")
	}
	if f.quick {
		cfg.Sizes = loadtest.QuickSizes
		if f.only == "" {
			cfg.Skip = loadtest.QuickSkips
		}
	}
	cfg.DoorDevices = f.doorDevices
	return cfg
}

func writeOutputs(ctx context.Context, f runFlags, r *loadtest.Report, started time.Time) error {
	if f.jsonOut != "" {
		if err := r.WriteJSONFile(f.jsonOut); err != nil {
			return err
		}
	}
	if f.charts != "" {
		if err := loadtest.WriteCharts(f.charts, r); err != nil {
			return err
		}
	}
	if f.markdown == "" {
		return nil
	}
	scale := loadtest.FullScale
	if seed, err := loadtest.ReadSeedAt(ctx, f.db); err == nil {
		scale = seed.Scale
	}
	chartDir := ""
	if f.charts != "" {
		rel, err := filepath.Rel(filepath.Dir(f.markdown), f.charts)
		if err != nil {
			rel = f.charts
		}
		chartDir = filepath.ToSlash(rel)
	}
	return loadtest.WriteMarkdownFile(f.markdown, r, loadtest.MarkdownMeta{
		Date: started, Command: commandLine(), Scale: scale,
		ScenarioDuration: f.scenario, BaselineDuration: f.baseline, ChartDir: chartDir,
	})
}

// commandLine is how the page says it was made: make bench when run from
// it (BENCH_COMMAND), else the arguments.
func commandLine() string {
	if c := os.Getenv("BENCH_COMMAND"); c != "" {
		return c
	}
	return "loadtest " + strings.Join(os.Args[1:], " ")
}

func printTargets(w io.Writer, r *loadtest.Report) {
	fmt.Fprintln(w, "\ntargets:")
	for _, t := range loadtest.Targets(r) {
		met := "not measured"
		if t.Met != nil {
			met = map[bool]string{true: "met", false: "NOT MET"}[*t.Met]
		}
		fmt.Fprintf(w, "  [%s] %s: %s: want %s, got %s\n", met, t.Topic, t.What, t.Want, t.Got)
	}
}
