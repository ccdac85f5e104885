package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/physiciansnet/capacityd/console"
	"github.com/physiciansnet/capacityd/store"
)

// consoleLink is `capacityd console-link`: it stores a one-time sign-in
// link to the console for --sub, with each --role and, with --admin,
// "admin", usable once within --ttl, and prints it.
func consoleLink(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var sub string
	var admin bool
	var roles roleList
	var ttl time.Duration
	cfg, err := loadConfig("console-link", settingsNamed("DATABASE_URL", "CONSOLE_BASE_URL", "LISTEN_ADDR"), args, getenv, stderr,
		func(fs *flag.FlagSet) {
			fs.StringVar(&sub, "sub", "", "the user id to sign in as (1-128 characters)")
			fs.BoolVar(&admin, "admin", false, "sign in with the admin role")
			fs.Var(&roles, "role", "add this role to the session's roles, such as a check-in list's door role (repeatable)")
			fs.DurationVar(&ttl, "ttl", console.DefaultLinkTTL, "how long the link can be used (once)")
		})
	if err != nil {
		return err
	}
	if n := len([]rune(sub)); n < 1 || n > 128 {
		return errors.New("--sub: want a user id of 1 to 128 characters")
	}
	if ttl <= 0 || ttl > 24*time.Hour {
		return errors.New("--ttl must be positive and at most 24h")
	}
	if admin && !slices.Contains(roles, "admin") {
		roles = append(roles, "admin")
	}
	pool, err := store.OpenConnPool(ctx, cfg.DatabaseURL, store.ConnPoolConfig{MaxConns: 1})
	if err != nil {
		return err
	}
	defer pool.Close()
	path, err := console.NewLink(ctx, store.New(pool), console.Grant{Sub: sub, Roles: roles}, ttl, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, consoleBaseURL(cfg)+path)
	return nil
}

// consoleBaseURL is CONSOLE_BASE_URL, or http://localhost on LISTEN_ADDR's
// port.
func consoleBaseURL(cfg config) string {
	if cfg.App.Console.BaseURL != "" {
		return cfg.App.Console.BaseURL
	}
	_, port, err := net.SplitHostPort(cfg.ListenAddr)
	if err != nil || port == "" {
		port = "8080"
	}
	return "http://localhost:" + port
}
