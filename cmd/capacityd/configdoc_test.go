package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigurationDocIsUpToDate fails while docs/configuration.md is not
// what the settings table renders to. Run `make docs` to update it.
func TestConfigurationDocIsUpToDate(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	require.NoError(t, err)
	if string(got) != configDoc(serveSettings) {
		t.Fatal("docs/configuration.md is out of date with the settings in cmd/capacityd/config.go: run `make docs` and commit the result")
	}
}

// TestConfigDocCommandPrintsTheReference checks the unlisted subcommand
// that make docs runs.
func TestConfigDocCommandPrintsTheReference(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"config-doc"}, envOf(nil), &stdout, &stderr))
	require.Equal(t, configDoc(serveSettings), stdout.String())
	require.Empty(t, stderr.String())
}

// TestConfigDocHasARowPerSetting checks that every setting of the table
// appears once, in order, with its flag and its default as a value (a
// default computed from a package's constant shows what it computes to).
func TestConfigDocHasARowPerSetting(t *testing.T) {
	t.Parallel()
	doc := configDoc(serveSettings)
	last := -1
	for _, s := range serveSettings {
		row := "| `" + s.env + "` | `--" + s.flagName() + "` | "
		require.Equal(t, 1, strings.Count(doc, row), "one row for %s", s.env)
		i := strings.Index(doc, row)
		require.Greater(t, i, last, "%s in the table's order", s.env)
		last = i
	}
	require.Contains(t, doc, "| `WEBHOOK_CONCURRENCY` | `--webhook-concurrency` | `16` | ")
	require.Contains(t, doc, "| `WEBHOOK_RETRY_BASE` | `--webhook-retry-base` | `5s` | ")
	require.Contains(t, doc, "| `DATABASE_URL` | `--database-url` | empty | PostgreSQL connection string (required) |")
}

func TestConfigDocEscapesMarkup(t *testing.T) {
	t.Parallel()
	doc := configDoc([]setting{{env: "A_B", def: "x", usage: "a|b, * for any, `c`, <d>"}})
	require.True(t, strings.HasSuffix(doc, "| `A_B` | `--a-b` | `x` | a\\|b, \\* for any, \\`c\\`, &lt;d> |\n"), doc)
}
