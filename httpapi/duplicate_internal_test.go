package httpapi

import (
	"bytes"
	"encoding/json"
	"slices"
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

// FuzzFlatPrintableKeysAgreesWithTheWalk checks that the flat bodies'
// shortcut of textOnly answers what the decoder's walk answers: the same
// keys, and a key named twice refused alike.
func FuzzFlatPrintableKeysAgreesWithTheWalk(f *testing.F) {
	for _, seed := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":1,"b":"x,y","c":null}`, `{"a":1,"a":2}`, `{"a" : "b" , "c" : true}`,
		`{"ticket":"eyJ.eyJ.c2ln","type":"entry","device":"door-3"}`, `{"a":{"a":1}}`, `{"a":[1,2]}`,
		`{"\u0061":1,"a":2}`, `{"a":"\t"}`, "{\"a\":\n1}", `{"名":1}`, `[]`, `"a"`, `{"":1,"":2}`, `{"a,":1,"b":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return // textOnly is only given bodies that decoded
		}
		keys, ok := flatPrintableKeys(b)
		if !ok {
			return
		}
		var walked []string
		walkErr := walkBody(json.NewDecoder(bytes.NewReader(b)), true, "", true, &walked)
		err := noKeyTwice(keys)
		require.Equal(t, walkErr == nil, err == nil, "%s: %v / %v", b, walkErr, err)
		if err != nil {
			require.Equal(t, walkErr.Error(), err.Error())
			return
		}
		require.True(t, slices.Equal(walked, keys), "%s: %q / %q", b, walked, keys)
	})
}
