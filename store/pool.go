package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PoolConfig tunes the connection pool.
type PoolConfig struct {
	// MaxConns caps the pool. Default 16.
	MaxConns int32
	// StatementTimeout bounds every statement. Default 10s.
	StatementTimeout time.Duration
	// IdleInTransactionTimeout ends sessions idle inside a transaction.
	// Default 15s.
	IdleInTransactionTimeout time.Duration
	// ConnectTimeout bounds dialing. Default 3s.
	ConnectTimeout time.Duration
	// Tracer, when set, observes every query (tests count queries with it).
	Tracer pgx.QueryTracer
}

// sessionTimeouts are the runtime parameters that bound statements and
// idle transactions, in milliseconds.
var sessionTimeouts = []string{"statement_timeout", "idle_in_transaction_session_timeout"}

// OpenPool connects to PostgreSQL, directly or through a transaction
// pooler such as PgBouncer, with the same URL either way:
//
//   - Queries use pgx's describe cache (QueryExecModeCacheDescribe), which
//     needs no named prepared statement to outlive a transaction; a
//     default_query_exec_mode in the URL (e.g. cache_statement, for a
//     direct connection) takes precedence.
//   - The timeouts are sent as session parameters when the server keeps
//     them; a pooler that refuses or drops them (PgBouncer without or with
//     ignore_startup_parameters) is detected at the first connection, and
//     the pool then connects without them. Transactions set them with SET
//     LOCAL in any case (see Store.inTx), so nothing relies on a session.
//
// Advisory locks are transaction-level only, and migrations, whose lock
// lasts a session, go straight to PostgreSQL (capacityd migrate).
func OpenPool(ctx context.Context, url string, pc PoolConfig) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	cfg.MaxConns = pc.MaxConns
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 16
	}
	if !strings.Contains(url, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	timeout := func(d, def time.Duration) string {
		if d <= 0 {
			d = def
		}
		return strconv.FormatInt(d.Milliseconds(), 10)
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["statement_timeout"] = timeout(pc.StatementTimeout, 10*time.Second)
	rp["idle_in_transaction_session_timeout"] = timeout(pc.IdleInTransactionTimeout, 15*time.Second)
	rp["application_name"] = "capacityd"
	cfg.ConnConfig.Tracer = pc.Tracer
	cfg.ConnConfig.ConnectTimeout = pc.ConnectTimeout
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	}
	cfg.BeforeConnect = (&sessionProbe{}).beforeConnect
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	return pool, nil
}

// sessionProbe finds out, at the first connection, whether the server
// keeps the session timeouts given at connect.
type sessionProbe struct {
	mu      sync.Mutex
	decided bool
	keep    bool
}

// beforeConnect leaves the session timeouts out of a connection's startup
// parameters when the server does not keep them.
func (p *sessionProbe) beforeConnect(ctx context.Context, cc *pgx.ConnConfig) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.decided {
		keep, err := keepsSessionTimeouts(ctx, cc)
		if err != nil {
			return err
		}
		p.decided, p.keep = true, keep
	}
	if !p.keep {
		for _, name := range sessionTimeouts {
			delete(cc.RuntimeParams, name)
		}
	}
	return nil
}

// keepsSessionTimeouts connects once with the timeouts as startup
// parameters and reports whether the server took them: PgBouncer refuses
// parameters it does not know ("unsupported startup parameter") unless
// told to ignore them, and then the session has the server's defaults.
func keepsSessionTimeouts(ctx context.Context, cc *pgx.ConnConfig) (bool, error) {
	conn, err := pgconn.ConnectConfig(ctx, cc.Config.Copy())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.Contains(pgErr.Message, "startup parameter") {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Exec(ctx, `SELECT setting FROM pg_settings WHERE name = 'statement_timeout'`).ReadAll()
	if err != nil {
		return false, err
	}
	if len(rows) != 1 || len(rows[0].Rows) != 1 {
		return false, errors.New("statement_timeout: no setting")
	}
	return string(rows[0].Rows[0][0]) == cc.RuntimeParams["statement_timeout"], nil
}

// localTimeouts returns a SET LOCAL statement for each session timeout
// among params.
func localTimeouts(params map[string]string) []string {
	var out []string
	for _, name := range sessionTimeouts {
		if v, ok := params[name]; ok {
			out = append(out, fmt.Sprintf("SET LOCAL %s = '%s'", name, strings.ReplaceAll(v, "'", "''")))
		}
	}
	return out
}

// hasSessionTimeouts reports whether a connection was opened with the
// session timeouts.
func hasSessionTimeouts(conn *pgx.Conn) bool {
	_, ok := conn.Config().RuntimeParams["statement_timeout"]
	return ok
}
