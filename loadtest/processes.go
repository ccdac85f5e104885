package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// benchBackendsSQL lists the PostgreSQL processes whose processor time a
// scenario is charged: every process connected to the bench database
// (capacityd's and the load test's own connections, autovacuum workers
// and parallel workers on it) and the server's shared writers, whose work
// grows with the WAL and the dirty pages the bench writes: the WAL writer,
// the checkpointer and the background writer. Left out are the
// postmaster (its own time is the forks of every database's connections;
// its children's time is every database's ended backends), the
// autovacuum launcher, and the backends of other databases.
const benchBackendsSQL = `
	SELECT pid FROM pg_stat_activity
	WHERE datname = $1 OR backend_type IN ('walwriter', 'checkpointer', 'background writer')`

// BenchBackends returns the process ids of the PostgreSQL processes that
// serve the bench database (see benchBackendsSQL). The monitor's own
// backend is on another database.
func (m *Monitor) BenchBackends(ctx context.Context) ([]int, error) {
	rows, err := m.conn.Query(ctx, benchBackendsSQL, m.db)
	if err != nil {
		return nil, fmt.Errorf("loadtest: list the bench's backends: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("loadtest: list the bench's backends: %w", err)
	}
	return pids, nil
}

// redisPID returns the process id of the Redis server rdb talks to. The
// server is counted whole: its other clients' work cannot be told apart.
func redisPID(ctx context.Context, rdb *redis.Client) (int, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0, fmt.Errorf("loadtest: read the Redis server's process id: %w", err)
	}
	return parseRedisPID(info)
}

// parseRedisPID finds process_id in the text of INFO server.
func parseRedisPID(info string) (int, error) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("loadtest: no process_id in Redis's INFO server")
}

// processes is the bench's ProcessFunc: the capacityd the load test
// started (none when it measures a service at a given URL, whose
// processes it does not know), the PostgreSQL processes that serve the
// bench database and the Redis server. A part that cannot be listed is
// left out of the groups, not guessed by process name: other processes
// named capacityd or postgres on a shared machine are not the bench's.
func (b *bench) processes(ctx context.Context) (map[int]string, error) {
	out := make(map[int]string)
	if b.server != nil {
		out[b.server.PID()] = CPUCapacityd
	}
	if b.mon != nil {
		pids, err := b.mon.BenchBackends(ctx)
		if err != nil {
			return nil, err
		}
		for _, pid := range pids {
			out[pid] = CPUPostgres
		}
	}
	if b.rdb != nil {
		if pid, err := redisPID(ctx, b.rdb); err == nil {
			out[pid] = CPURedis
		}
	}
	return out, nil
}
