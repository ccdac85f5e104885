package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/physiciansnet/capacityd/httpapi"
)

// token is `capacityd token`: it prints an HS256 token for --sub, valid for
// --ttl, whose roles claim holds each --role and, with --admin, "admin".
func token(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var sub string
	var admin bool
	var roles roleList
	var ttl time.Duration
	cfg, err := loadConfig("token", settingsNamed("CAPACITY_JWT_SECRET", "JWT_ISSUER", "JWT_AUDIENCE"), args, getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&sub, "sub", "", "the user id (1-128 characters)")
		fs.BoolVar(&admin, "admin", false, "give the token the admin role")
		fs.Var(&roles, "role", "add this role to the token's roles claim, such as the role a block is held for (repeatable)")
		fs.DurationVar(&ttl, "ttl", time.Hour, "how long the token is valid")
	})
	if err != nil {
		return err
	}
	if ttl <= 0 {
		return errors.New("--ttl must be positive")
	}
	if admin && !slices.Contains(roles, "admin") {
		roles = append(roles, "admin")
	}
	auth, err := httpapi.NewTokenAuthenticator(context.Background(), cfg.tokenConfig(nil))
	if err != nil {
		return err
	}
	tok, err := auth.SignRoles(sub, roles, ttl)
	if err != nil {
		return fmt.Errorf("--sub: %w", err)
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// roleList is the --role flag: the roles in the order given, each once.
type roleList []string

// String returns the roles, comma-separated.
func (r *roleList) String() string { return strings.Join(*r, ",") }

// Set adds one role: a name of visible characters, without spaces, that is
// matched exactly (so "Admin" is not "admin").
func (r *roleList) Set(v string) error {
	if v == "" || strings.IndexFunc(v, func(c rune) bool { return !unicode.IsGraphic(c) || unicode.IsSpace(c) }) >= 0 {
		return fmt.Errorf("want a role name of visible characters without spaces, got %q", v)
	}
	if !slices.Contains(*r, v) {
		*r = append(*r, v)
	}
	return nil
}
