// Command formation starts a pg_auto_failover formation of its own (a
// monitor, a primary and a synchronous standby, as internal/test/testenv runs
// them for the failover tests), prints the service's multi-host URL on a
// line of its own, and holds the formation until it is interrupted
// (SIGINT, SIGTERM); it then stops it and removes its folder. It lets a
// measurement such as the load test (BENCH_DATABASE_URL) run on a
// formation:
//
//	go run ./internal/test/formation [-async]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/physiciansnet/capacityd/internal/test/testenv"
)

func main() {
	async := flag.Bool("async", false, "leave the standby out of the write quorum (asynchronous replication)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := testenv.NewSession(log)
	defer s.Close()
	var f *testenv.AutoFailover
	if err := s.Do(func() { f = testenv.PrivateAutoFailover(s, testenv.AutoFailoverOptions{Async: *async}) }); err != nil {
		log.Error("formation", "err", err)
		s.Close()
		os.Exit(1)
	}
	fmt.Println(f.URL())
	<-ctx.Done()
	log.Info("formation: stopping")
}
