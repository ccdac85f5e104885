// Command loadtest seeds a benchmark database and measures capacityd and
// PostgreSQL side by side (see package loadtest and BENCHMARKS.md).
//
//	loadtest seed  [-quick] [-db URL]        (re)create and fill the bench database
//	loadtest run   [-quick] [-json FILE] …   baselines, COUNT plan and HTTP scenarios
//
// Settings default from the environment: BENCH_DATABASE_URL (else
// DATABASE_URL's server with the database capacityd_bench) and
// BENCH_REDIS_URL (else REDIS_URL's server with logical database 2).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/physiciansnet/capacityd/loadtest"
)

const usage = `usage: loadtest <command> [flags]

commands:
  seed   (re)create the bench database and fill it (3,000 activities, a hot one of 80,000 rows)
  run    measure: pgx baselines, the authority COUNT's plan, and the HTTP scenarios
  soak   mixed load for -duration (10m) on private PostgreSQL and Redis, each restarted once; checks exactness and leaks

Run "loadtest <command> -h" for its flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
		}
		os.Exit(1)
	}
}

// run dispatches one subcommand. A new subcommand is one more case.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "seed":
		return seedCommand(ctx, args[1:], getenv, stdout, stderr)
	case "run":
		return runCommand(ctx, args[1:], getenv, stdout, stderr)
	case "soak":
		return loadtest.SoakCommand(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
