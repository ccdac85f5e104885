package browsertest

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// axeSource is axe-core 4.14.1 (npm axe-core, MPL-2.0, LICENSE beside it),
// the accessibility checker pages are run through.
//
//go:embed axe/axe.min.js
var axeSource string

// AxeViolation is one rule a page breaks, as axe-core reports it.
type AxeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// String names the rule and the elements that break it.
func (v AxeViolation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %s", v.ID, v.Impact, v.Help)
	for _, n := range v.Nodes {
		fmt.Fprintf(&b, "\n    %v %s", n.Target, n.HTML)
	}
	return b.String()
}

// Axe runs axe-core on the tab's page (through the DevTools protocol, so a
// page's content security policy does not stop it) and returns its
// violations.
func Axe(t *testing.T, ctx context.Context) []AxeViolation {
	t.Helper()
	js := axeSource + `;
		axe.run(document, {resultTypes: ['violations']}).then(r => JSON.stringify(r.violations))`
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	var vs []AxeViolation
	require.NoError(t, json.Unmarshal([]byte(out), &vs))
	return vs
}

// RequireAccessible fails t when axe-core finds a serious or critical
// violation on the tab's page; the others are logged.
func RequireAccessible(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	var bad []string
	for _, v := range Axe(t, ctx) {
		if v.Impact == "serious" || v.Impact == "critical" {
			bad = append(bad, v.String())
			continue
		}
		t.Logf("%s: axe-core (%s, not failing): %s", page, v.Impact, v.String())
	}
	require.Empty(t, bad, "%s: axe-core finds serious or critical violations:\n%s", page, strings.Join(bad, "\n"))
}
