package httpapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
)

func TestNoDuplicateKeys(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		`{}`, `[]`, `1`, `"a"`, `null`, `{"a":1,"b":2}`, `{"a":{"a":1},"b":{"a":2}}`, `[{"a":1},{"a":2}]`,
		`{"a":"a","b":"a"}`, `{"a":["a","a"]}`, `{"A":1,"a":2}`, `{"a":{"b":[{"c":1},{"c":1}]}}`,
		strings.Repeat(`[`, 5000) + strings.Repeat(`]`, 5000),
	} {
		require.NoError(t, noDuplicateKeys([]byte(ok)), ok)
	}
	for _, dup := range []string{
		`{"a":1,"a":2}`, `{"capacity":5,"capacity":1000000}`, `{"a":1,"\u0061":2}`, `{"m":{"x":1,"x":1}}`,
		`[{"a":1,"b":2,"a":3}]`, `{"a":{"b":[1,{"c":1,"c":2}]}}`, `{"":1,"":2}`, `{"a":{},"a":[]}`,
	} {
		err := noDuplicateKeys([]byte(dup))
		require.True(t, capacityd.IsCode(err, capacityd.EInvalid), "%s: %v", dup, err)
		require.Contains(t, err.Error(), "duplicate key", dup)
	}
}
