package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/physiciansnet/capacityd/store"
)

// Scale is the size of the seeded dataset.
type Scale struct {
	// Activities is the number of ordinary activities.
	Activities int
	// PerActivity is the number of registrations of each of them.
	PerActivity int
	// HotRows is the number of registrations of the one hot activity,
	// 70% of them cancelled.
	HotRows int
}

// FullScale is make bench's dataset: 3,000 activities of 300
// registrations and a hot activity of 80,000 (24,000 occupying): 980,000
// rows.
var FullScale = Scale{Activities: 3000, PerActivity: 300, HotRows: 80000}

// QuickScale keeps the hot activity of the full scale (the COUNT that
// admission pays) but only 1,000 ordinary activities of 100 rows: 180,000
// rows, seeded in a few seconds.
var QuickScale = Scale{Activities: 1000, PerActivity: 100, HotRows: 80000}

// Rows returns the number of registrations the scale seeds.
func (s Scale) Rows() int { return s.Activities*s.PerActivity + s.HotRows }

// HotOccupying returns the number of occupying rows of the hot activity.
func (s Scale) HotOccupying() int { return s.HotRows - s.HotRows*7/10 }

// Validate checks that the scale can be seeded.
func (s Scale) Validate() error {
	if s.Activities < 1 || s.PerActivity < 1 || s.HotRows < 10 {
		return fmt.Errorf("loadtest: scale %+v: want at least 1 activity, 1 row each and 10 hot rows", s)
	}
	return nil
}

// SeedInfo describes a seeded database, read back from its loadtest_seed
// table.
type SeedInfo struct {
	Scale Scale
	// HotActivity is the public id of the hot activity and HotID its
	// internal id.
	HotActivity string
	HotID       int64
	// SmallActivity is the public id of an ordinary activity and SmallID
	// its internal id.
	SmallActivity string
	SmallID       int64
	// MaxRegistrationID is the largest seeded registration id: rows above
	// it were added by scenarios.
	MaxRegistrationID int64
}

// ActivityPublicID returns the public id the seed gives activity number
// n (1-based): "a_" and a valid ULID made of a fixed prefix and n in
// hexadecimal (hex digits are Crockford base32 digits).
func ActivityPublicID(n int) string { return fmt.Sprintf("a_01JD%022X", n) }

// databaseName returns the database named by a PostgreSQL URL.
func databaseName(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("loadtest: database URL: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		return "", errors.New("loadtest: the database URL names no database")
	}
	return name, nil
}

// withDatabase returns dbURL with its database replaced by name.
func withDatabase(dbURL, name string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("loadtest: database URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// checkBenchName refuses to drop a database whose name does not say it is
// a benchmark's, so a wrong URL cannot wipe a real one.
func checkBenchName(name string) error {
	if !strings.Contains(name, "bench") {
		return fmt.Errorf("loadtest: refusing to recreate database %q: its name must contain \"bench\"", name)
	}
	if strings.ContainsAny(name, `"`) {
		return fmt.Errorf("loadtest: bad database name %q", name)
	}
	return nil
}

// Seed (re)creates the database of dbURL, migrates it and fills it at the
// given scale. It is idempotent: the database is dropped and recreated
// each time, so every run starts from the same data. The hot activity's
// rows are interleaved in time (and in the heap) among the others, as a
// real table's would be.
func Seed(ctx context.Context, dbURL string, s Scale, log io.Writer) (SeedInfo, error) {
	if err := s.Validate(); err != nil {
		return SeedInfo{}, err
	}
	name, err := databaseName(dbURL)
	if err != nil {
		return SeedInfo{}, err
	}
	if err := checkBenchName(name); err != nil {
		return SeedInfo{}, err
	}
	begin := time.Now()
	if err := recreateDatabase(ctx, dbURL, name); err != nil {
		return SeedInfo{}, err
	}
	pool, err := store.OpenConnPool(ctx, dbURL, store.ConnPoolConfig{MaxConns: 2, StatementTimeout: 10 * time.Minute})
	if err != nil {
		return SeedInfo{}, err
	}
	defer pool.Close()
	if _, err := store.Migrate(ctx, pool); err != nil {
		return SeedInfo{}, fmt.Errorf("loadtest: migrate %s: %w", name, err)
	}
	fmt.Fprintf(log, "seed: %s recreated and migrated (%s)\n", name, time.Since(begin).Round(time.Millisecond))
	for _, st := range seedStatements(s) {
		t0 := time.Now()
		if _, err := pool.Exec(ctx, st.sql, st.args...); err != nil {
			return SeedInfo{}, fmt.Errorf("loadtest: seed %s: %w", st.what, err)
		}
		fmt.Fprintf(log, "seed: %s (%s)\n", st.what, time.Since(t0).Round(time.Millisecond))
	}
	info, err := ReadSeed(ctx, pool)
	if err != nil {
		return info, err
	}
	fmt.Fprintf(log, "seed: %d activities, %d registrations, hot activity %s with %d rows (%d occupying); %s in all\n",
		s.Activities+1, s.Rows(), info.HotActivity, s.HotRows, s.HotOccupying(), time.Since(begin).Round(time.Millisecond))
	return info, nil
}

func recreateDatabase(ctx context.Context, dbURL, name string) error {
	admin, err := withDatabase(dbURL, "postgres")
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("loadtest: connect to the postgres database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+ident+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("loadtest: drop %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+ident); err != nil {
		return fmt.Errorf("loadtest: create %s: %w", name, err)
	}
	return nil
}

type statement struct {
	what string
	sql  string
	args []any
}

// seedStatements returns the SQL that fills a freshly migrated database.
//
// Registration g (0-based, in insertion and created_at order) belongs to
// the hot activity when floor((g+1)·H/N) > floor(g·H/N): H rows spread
// evenly among N. The others (number k among them) go to ordinary
// activities in groups of eight that take turns, as signups for events
// of the same weeks would. 70% of the hot rows and 69% of the others are
// cancelled; the rest are pending or approved.
func seedStatements(s Scale) []statement {
	n, h := s.Rows(), s.HotRows
	group := 1
	if s.Activities%8 == 0 {
		group = 8
	}
	hot := s.Activities + 1
	return []statement{
		{"activities", `
			INSERT INTO activity (public_id, title, capacity, hold_seconds, created_at, updated_at)
			SELECT 'a_01JD' || lpad(upper(to_hex(g)), 22, '0'),
			       CASE WHEN g = $2 THEN 'Bench hot activity' ELSE 'Bench activity ' || g END,
			       1000000, 900, $1::timestamptz, $1::timestamptz
			FROM generate_series(1, $2) AS g ORDER BY g`,
			[]any{seedEpoch, hot}},
		{fmt.Sprintf("%d registrations", n), `
			INSERT INTO registration (public_id, activity_id, user_id, status, created_at, updated_at)
			SELECT 'r_01JD' || lpad(upper(to_hex(g + 1)), 22, '0'),
			       CASE WHEN is_hot THEN $5::bigint ELSE (k / ($3::bigint * $4)) * $4 + k % $4 + 1 END,
			       'seed-' || g,
			       CASE WHEN is_hot THEN (CASE WHEN hi % 10 < 7 THEN 'cancelled' WHEN hi % 2 = 0 THEN 'approved' ELSE 'pending' END)
			            ELSE (CASE WHEN (k * 37) % 100 < 69 THEN 'cancelled' WHEN k % 2 = 0 THEN 'approved' ELSE 'pending' END) END,
			       $6::timestamptz + g * interval '10 milliseconds',
			       $6::timestamptz + g * interval '10 milliseconds'
			FROM (
			    SELECT g,
			           ((g + 1) * $2::bigint) / $1::bigint > (g * $2::bigint) / $1::bigint AS is_hot,
			           (g * $2::bigint) / $1::bigint AS hi,
			           g - ((g + 1) * $2::bigint) / $1::bigint AS k
			    FROM generate_series(0::bigint, $1::bigint - 1) AS g
			) AS rows
			ORDER BY g`,
			[]any{n, h, s.PerActivity, group, hot, seedEpoch}},
		{"vacuum analyze", `VACUUM (ANALYZE) activity, registration`, nil},
		{"seed marker", `
			CREATE TABLE loadtest_seed AS
			SELECT $1::int AS activities, $2::int AS per_activity, $3::int AS hot_rows,
			       $4::bigint AS hot_id, 1::bigint AS small_id,
			       (SELECT max(id) FROM registration) AS max_registration_id, now() AS seeded_at`,
			[]any{s.Activities, s.PerActivity, s.HotRows, hot}},
	}
}

// seedEpoch is the creation time of the seeded rows.
var seedEpoch = time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)

// ReadSeed reads what Seed recorded in db.
func ReadSeed(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (SeedInfo, error) {
	var i SeedInfo
	err := db.QueryRow(ctx, `SELECT activities, per_activity, hot_rows, hot_id, small_id, max_registration_id FROM loadtest_seed`).
		Scan(&i.Scale.Activities, &i.Scale.PerActivity, &i.Scale.HotRows, &i.HotID, &i.SmallID, &i.MaxRegistrationID)
	if err != nil {
		return i, fmt.Errorf("loadtest: read the seed marker (run `loadtest seed` first): %w", err)
	}
	i.HotActivity = ActivityPublicID(int(i.HotID))
	i.SmallActivity = ActivityPublicID(int(i.SmallID))
	return i, nil
}

// ReadSeedAt connects to dbURL and reads what Seed recorded there.
func ReadSeedAt(ctx context.Context, dbURL string) (SeedInfo, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return SeedInfo{}, fmt.Errorf("loadtest: connect to the bench database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return ReadSeed(ctx, conn)
}
