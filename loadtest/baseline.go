package loadtest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// baselineSchema is what the pgbench-like baselines write to, in the
// bench database, recreated at every run.
const baselineSchema = `
DROP TABLE IF EXISTS lt_counter, lt_counter_dead, lt_event, lt_note;
CREATE TABLE lt_counter (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
INSERT INTO lt_counter (id) SELECT generate_series(1, 10);
CREATE TABLE lt_counter_dead (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0) WITH (autovacuum_enabled = off);
INSERT INTO lt_counter_dead (id) VALUES (1);
CREATE TABLE lt_event (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(), v int NOT NULL);
CREATE TABLE lt_note (note_id text PRIMARY KEY, views bigint NOT NULL DEFAULT 0, waters bigint NOT NULL DEFAULT 0);
`

// baseline is one pgbench-like script: clients run stmt back to back, each
// on a connection of its own (when the server allows that many).
type baseline struct {
	name    string
	clients int
	sql     string
	args    func() []any
	// asyncCommit sets synchronous_commit=off on the connections.
	asyncCommit bool
}

func noArgs() []any { return nil }

var baselines = []baseline{
	{name: BaselineHotRow1, clients: 1, sql: `UPDATE lt_counter SET n = n + 1 WHERE id = 1`, args: noArgs},
	{name: BaselineHotRow32, clients: 32, sql: `UPDATE lt_counter SET n = n + 1 WHERE id = 1`, args: noArgs},
	{name: BaselineHotRow256, clients: 256, sql: `UPDATE lt_counter SET n = n + 1 WHERE id = 1`, args: noArgs},
	{name: BaselineShard10x32, clients: 32, sql: `UPDATE lt_counter SET n = n + 1 WHERE id = $1`,
		args: func() []any { return []any{1 + rand.IntN(10)} }},
	{name: BaselineAppend32, clients: 32, sql: `INSERT INTO lt_event (v) VALUES ($1)`,
		args: func() []any { return []any{rand.IntN(1000)} }},
	{name: BaselineNoteUpsert32, clients: 32, sql: `INSERT INTO lt_note AS s (note_id, views) VALUES ('hot', 1)
		ON CONFLICT (note_id) DO UPDATE SET views = s.views + 1 RETURNING views, waters`, args: noArgs},
	{name: BaselineHotRowAsync32, clients: 32, sql: `UPDATE lt_counter SET n = n + 1 WHERE id = 1`, args: noArgs, asyncCommit: true},
}

// maxBaselineRate bounds a baseline's statements per second, far above
// what two cores run: the time bounds it first.
const maxBaselineRate = 200000

// deadTupleUpdates is the number of hot-row updates (and of signups) whose
// dead tuples are compared.
const deadTupleUpdates = 16000

// RunBaselines runs every baseline for d each against dbURL and records
// tps in r.Baselines, then the dead tuples of updates (16,000 in make
// bench) hot-row updates in r.Checks.
func RunBaselines(ctx context.Context, dbURL string, d time.Duration, updates int, r *Report, log io.Writer) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("loadtest: baselines: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, baselineSchema); err != nil {
		return fmt.Errorf("loadtest: baselines: schema: %w", err)
	}
	free, err := freeConnections(ctx, conn)
	if err != nil {
		return err
	}
	for _, b := range baselines {
		conns := min(b.clients, free)
		out, err := runBaseline(ctx, dbURL, b, conns, Load{Name: b.name, Clients: b.clients, Duration: d, MaxOps: int64(d.Seconds()*maxBaselineRate) + 1000}, log)
		if err != nil {
			return err
		}
		if out.Ops > 0 {
			r.Baselines[b.name] = Num(round(float64(out.Ops)/out.Elapsed.Seconds(), 1))
		}
		if b.name == BaselineHotRow256 {
			r.Baselines[BaselineHotRow256Conns] = Num(float64(conns))
			if conns < b.clients {
				fmt.Fprintf(log, "%-16s ran %d clients on %d connections (the server's max_connections allows no more)\n", b.name, b.clients, conns)
			}
		}
	}
	dead, err := hotRowDeadTuples(ctx, dbURL, conn, updates, log)
	if err != nil {
		return err
	}
	r.Checks[CheckHotRowDeadTuples] = dead
	// Dropped, the tables give autovacuum nothing to do later, when its
	// transactions would be counted as the service's.
	if _, err := conn.Exec(ctx, `DROP TABLE lt_counter, lt_counter_dead, lt_event, lt_note`); err != nil {
		return fmt.Errorf("loadtest: baselines: drop tables: %w", err)
	}
	return nil
}

// freeConnections returns how many more connections the server accepts,
// keeping 12 for capacityd and everyone else.
func freeConnections(ctx context.Context, conn *pgx.Conn) (int, error) {
	var free int
	err := conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int
		- current_setting('superuser_reserved_connections')::int
		- (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int - 12`).Scan(&free)
	if err != nil {
		return 0, fmt.Errorf("loadtest: count free connections: %w", err)
	}
	return max(free, 1), nil
}

// runBaseline runs one baseline on a pool of conns connections, all
// opened before the clock starts.
func runBaseline(ctx context.Context, dbURL string, b baseline, conns int, l Load, log io.Writer) (Outcome, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return Outcome{}, fmt.Errorf("loadtest: baselines: %w", err)
	}
	cfg.MaxConns, cfg.MinConns = int32(conns), int32(conns)
	cfg.ConnConfig.RuntimeParams["application_name"] = "loadtest"
	if b.asyncCommit {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return Outcome{}, fmt.Errorf("loadtest: baselines: %w", err)
	}
	defer pool.Close()
	if err := warmPool(ctx, pool, conns); err != nil {
		return Outcome{}, err
	}
	l.WAL = func(ctx context.Context) (int64, error) { return walPosition(ctx, pool) }
	return Drive(ctx, l, log, func(ctx context.Context, _ int, _ int64) error {
		_, err := pool.Exec(ctx, b.sql, b.args()...)
		return err
	}), nil
}

// warmPool opens n connections and prepares nothing: pgxpool then hands
// them out without dialing under load.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("loadtest: baselines: open connection %d of %d: %w", len(conns)+1, n, err)
		}
		conns = append(conns, c)
	}
	return nil
}

// hotRowDeadTuples runs updates updates of one row (32 clients,
// autovacuum off for the table) and returns the dead tuples the
// statistics count.
func hotRowDeadTuples(ctx context.Context, dbURL string, conn *pgx.Conn, updates int, log io.Writer) (int64, error) {
	b := baseline{name: "pg_hot_row_dead", clients: 32, sql: `UPDATE lt_counter_dead SET n = n + 1 WHERE id = 1`, args: noArgs}
	out, err := runBaseline(ctx, dbURL, b, 32, Load{Name: "hot_row_16k", Clients: 32, Duration: 2 * time.Minute, MaxOps: int64(updates)}, log)
	if err != nil {
		return 0, err
	}
	if out.Errors > 0 {
		return 0, fmt.Errorf("loadtest: hot-row updates failed: %v", out.FirstError)
	}
	// The pool is closed: its backends flushed their statistics on exit.
	if err := sleep(ctx, statsFlushWait); err != nil {
		return 0, err
	}
	n, err := DeadTuples(ctx, conn, "lt_counter_dead")
	if err == nil {
		fmt.Fprintf(log, "%-16s dead tuples after %d updates of one row: %d\n", "hot_row_16k", updates, n)
	}
	return n, err
}
