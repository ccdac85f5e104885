package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/physiciansnet/capacityd/migrations"
)

// errSchemaBehind is returned when the database lacks migrations this
// release needs; retrying does not help.
var errSchemaBehind = errors.New("the database has pending migrations: run capacityd migrate first (or set MIGRATE_ON_START=true)")

// requireCurrentSchema checks, with reads only, that every migration of
// this release has been applied, for a service role without DDL rights
// (MIGRATE_ON_START=false). A database ahead of this release (a newer
// release migrated it) is accepted.
func requireCurrentSchema(ctx context.Context, pool *pgxpool.Pool) error {
	// goose keeps its versions in goose_db_version; a database that never
	// saw a migration has none.
	var migrated bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&migrated); err != nil {
		return fmt.Errorf("schema check: %w", err)
	}
	if !migrated {
		return errSchemaBehind
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		return fmt.Errorf("schema check: %w", err)
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("schema check: %w", err)
	}
	if pending {
		return errSchemaBehind
	}
	return nil
}
