package widget_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd/httpapi/widget"
)

// TestScriptsAreServedWhole checks that every widget script is served with
// the parts it includes in place, once each, that the parts themselves are
// not served, and that every part is included by some script.
func TestScriptsAreServedWhole(t *testing.T) {
	t.Parallel()
	parts := []string{"lang.js", "style.js"}
	included := map[string]int{}
	for _, name := range widget.Names {
		b, ok := widget.Script(name)
		require.True(t, ok, name)
		require.NotContains(t, string(b), "@include", "%s is served with its parts in place", name)
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		for _, part := range parts {
			p, err := os.ReadFile(part)
			require.NoError(t, err)
			n := bytes.Count(src, []byte("// @include "+part+"\n"))
			require.Equal(t, n, bytes.Count(b, p), "%s holds %s as often as it names it", name, part)
			included[part] += n
		}
	}
	for _, part := range parts {
		_, ok := widget.Script(part)
		require.False(t, ok, "%s is a part, not a served script", part)
		require.Positive(t, included[part], "some script includes %s", part)
	}
	_, ok := widget.Script("nope.js")
	require.False(t, ok)
}
