package main

import (
	"fmt"
	"strings"
)

// configDocHeader opens docs/configuration.md, before the table.
const configDocHeader = `# Configuration

<!-- Generated from the settings table in cmd/capacityd/config.go by
     ` + "`make docs`" + ` (capacityd config-doc). Do not edit by hand. -->

Settings come from the environment; flags of the same names override them
(` + "`DB_MAX_CONNS=32`" + ` or ` + "`--db-max-conns 32`" + `). A missing or invalid
setting stops the server at start with a message naming it.
` + "`capacityd serve`" + ` reads every setting below; ` + "`capacityd migrate`" + ` and
` + "`capacityd token`" + ` read the few they need (` + "`capacityd migrate -h`" + `,
` + "`capacityd token -h`" + `). ` + "`--dev`" + ` (a flag only) supplies a built-in,
public token secret when none is set: for development, never in production.

What the settings are for, and how to choose them, is in
[operations.md](operations.md) (tokens, the proxy, connection budgets,
logs, webhooks) and [deploy.md](deploy.md) (PgBouncer, Redis Cluster).

`

// configDoc renders settings as the Markdown reference
// docs/configuration.md: one row per setting, in the table's order, with
// its environment variable, flag, default and meaning.
func configDoc(settings []setting) string {
	var b strings.Builder
	b.WriteString(configDocHeader)
	b.WriteString("| environment | flag | default | meaning |\n|---|---|---|---|\n")
	for _, s := range settings {
		def := "empty"
		if s.def != "" {
			def = "`" + s.def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `--%s` | %s | %s |\n", s.env, s.flagName(), def, mdText(s.usage))
	}
	return b.String()
}

// mdText escapes the characters of a usage string that a Markdown table
// cell would otherwise read as markup.
var mdText = strings.NewReplacer(`\`, `\\`, "|", `\|`, "*", `\*`, "`", "\\`", "<", "&lt;").Replace
