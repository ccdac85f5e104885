// Command capacityd is the event-registration capacity service.
//
//	capacityd serve     applies pending migrations, then serves
//	capacityd migrate   applies pending migrations and exits
//	capacityd token     prints a token signed with CAPACITY_JWT_SECRET
//
// Settings come from the environment; flags of the same names override
// them (see capacityd serve -h).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/physiciansnet/capacityd/store"
)

const usage = `usage: capacityd <command> [flags]

commands:
  serve     apply pending migrations, then serve the HTTP API
  migrate   apply pending migrations and exit
  token     print a token: capacityd token --sub ID [--admin] [--role R]... [--ttl 1h]
  ticket-key rotate | retire --older-than D
            add a ticket signing key (the old ones keep verifying), or retire old keys
  console-link  print a one-time sign-in link to the console: capacityd console-link --sub NAME [--admin] [--role R]... [--ttl 10m]
  health    exit 0 when a URL answers 200 (container healthchecks): capacityd health URL

Run "capacityd <command> -h" for the settings of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "capacityd:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		cfg, err := loadConfig("serve", serveSettings, args[1:], getenv, stderr, nil)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, newLogger(stderr, cfg.LogLevel, cfg.LogFormat))
	case "migrate":
		cfg, err := loadConfig("migrate", settingsNamed("DATABASE_URL"), args[1:], getenv, stderr, nil)
		if err != nil {
			return err
		}
		return migrate(ctx, cfg, stdout)
	case "token":
		return token(args[1:], getenv, stdout, stderr)
	case "ticket-key":
		return ticketKey(ctx, args[1:], getenv, stdout, stderr)
	case "console-link":
		return consoleLink(ctx, args[1:], getenv, stdout, stderr)
	case "health":
		return health(args[1:], stdout)
	case "config-doc": // unlisted: make docs writes docs/configuration.md with it
		_, err := io.WriteString(stdout, configDoc(serveSettings))
		return err
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func migrate(ctx context.Context, cfg config, stdout io.Writer) error {
	pool, err := store.OpenConnPool(ctx, cfg.DatabaseURL, store.ConnPoolConfig{MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := store.Migrate(ctx, pool)
	if throughPooler(err) {
		return fmt.Errorf("%w; run capacityd migrate with DATABASE_URL naming the PostgreSQL server itself (its own host and port, not the pooler's)", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "migrations applied: %d %v\n", len(applied), applied)
	return nil
}

// health checks that url answers 200 within 3 seconds; containers without
// curl use it as their healthcheck.
func health(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return errors.New("usage: capacityd health URL")
	}
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(args[0])
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", args[0], resp.Status)
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}
