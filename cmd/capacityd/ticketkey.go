package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/physiciansnet/capacityd/checkin"
	"github.com/physiciansnet/capacityd/store"
	"github.com/physiciansnet/capacityd/webhook"
)

// ticketKey runs "capacityd ticket-key rotate" (a new key signs tickets
// and statements from now on; the keys before it keep verifying) and
// "capacityd ticket-key retire --older-than D" (keys made longer ago than
// D, but the newest, stop verifying: their tickets are refused).
func ticketKey(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "rotate" && args[0] != "retire") {
		return errors.New("usage: capacityd ticket-key rotate | retire --older-than 720h")
	}
	var olderThan time.Duration
	extra := func(fs *flag.FlagSet) {
		if args[0] == "retire" {
			fs.DurationVar(&olderThan, "older-than", 0, "retire the keys made longer ago than this (but the newest)")
		}
	}
	cfg, err := loadConfig("ticket-key "+args[0], settingsNamed("DATABASE_URL", "WEBHOOK_SECRET_KEY"), args[1:], getenv, stderr, extra)
	if err != nil {
		return err
	}
	pool, err := store.OpenConnPool(ctx, cfg.DatabaseURL, store.ConnPoolConfig{MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool)
	if args[0] == "retire" {
		if olderThan <= 0 {
			return errors.New("retire needs --older-than, a duration such as 720h")
		}
		n, err := st.RetireCheckinKeys(ctx, time.Now().Add(-olderThan))
		if err == nil {
			fmt.Fprintf(stdout, "retired %d ticket keys\n", n)
		}
		return err
	}
	sealer, err := webhook.NewSealer(cfg.App.WebhookSecretKey)
	if err != nil {
		return err
	}
	k, err := checkin.NewKey(time.Now().UTC())
	if err != nil {
		return err
	}
	sk, err := checkin.SealKey(sealer, k)
	if err != nil {
		return err
	}
	if err := st.AddCheckinKey(ctx, sk); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ticket key %s signs from now on (instances pick it up within a minute)\n", k.ID)
	return nil
}
