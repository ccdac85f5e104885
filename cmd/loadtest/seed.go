package main

import (
	"context"
	"flag"
	"io"
	"time"

	"github.com/physiciansnet/capacityd/loadtest"
)

func seedCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", benchDatabaseURL(getenv), "bench database URL; its name must contain \"bench\" (it is dropped and recreated)")
	quick := fs.Bool("quick", false, "seed the smaller quick scale (1,000 activities of 100 rows + the 80,000-row hot activity)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	scale := loadtest.FullScale
	if *quick {
		scale = loadtest.QuickScale
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	_, err := loadtest.Seed(ctx, *db, scale, stdout)
	return err
}
