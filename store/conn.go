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

// DefaultMaxConns is the size of a connection pool whose ConnPoolConfig says
// none.
const DefaultMaxConns = 16

// ConnPoolConfig tunes the connection pool.
type ConnPoolConfig struct {
	// MaxConns caps the pool. Default DefaultMaxConns.
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

// OpenConnPool connects to PostgreSQL, directly or through a transaction
// pooler such as PgBouncer, with the same URL either way. The first
// connection finds out whether the server keeps the session parameters
// given at connect (the timeouts): PostgreSQL does; a pooler refuses them
// (PgBouncer) or drops them (PgBouncer's ignore_startup_parameters). When
// they are not kept:
//
//   - the connection pool connects without them; transactions set them with SET
//     LOCAL in any case (see Store.inTx), so nothing relies on a session;
//   - queries use pgx's describe cache (QueryExecModeCacheDescribe)
//     instead of its statement cache, since a named prepared statement
//     does not outlive a transaction through a transaction pooler. A
//     default_query_exec_mode in the URL takes precedence either way.
//
// Advisory locks are transaction-level only, and migrations, whose lock
// lasts a session, go straight to PostgreSQL (capacityd migrate).
func OpenConnPool(ctx context.Context, url string, pc ConnPoolConfig) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	cfg.MaxConns = pc.MaxConns
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
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
	cfg.BeforeConnect = (&sessionProbe{execModeSet: strings.Contains(url, "default_query_exec_mode")}).beforeConnect
	connPool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	return connPool, nil
}

// sessionProbe finds out, at the first connection, whether the server
// keeps the session timeouts given at connect.
type sessionProbe struct {
	// execModeSet means the URL chose the query exec mode.
	execModeSet bool

	mu      sync.Mutex
	decided bool
	keep    bool
}

// beforeConnect leaves the session timeouts out of a connection's startup
// parameters, and uses the describe cache, when the server does not keep
// session state.
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
		if !p.execModeSet {
			cc.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		}
	}
	return nil
}

// keepsSessionTimeouts connects once with the timeouts as startup
// parameters and reports whether the server took them: PgBouncer refuses
// parameters it does not know ("unsupported startup parameter") unless
// told to ignore them, and then the session has the server's defaults.
// The probe asks for a statement_timeout one millisecond longer than the
// connection pool's, a value no role or database default is likely to have.
func keepsSessionTimeouts(ctx context.Context, cc *pgx.ConnConfig) (bool, error) {
	probe := cc.Config.Copy()
	ms, err := strconv.ParseInt(probe.RuntimeParams["statement_timeout"], 10, 64)
	if err != nil {
		return false, fmt.Errorf("statement_timeout: %w", err)
	}
	want := strconv.FormatInt(ms+1, 10)
	probe.RuntimeParams["statement_timeout"] = want
	conn, err := pgconn.ConnectConfig(ctx, probe)
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
	return string(rows[0].Rows[0][0]) == want, nil
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
