// Package migrations embeds the numbered SQL migrations of the schema. They
// are applied by store.Migrate with goose, each in its own transaction.
package migrations

import "embed"

// FS holds the migration files, named NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS
