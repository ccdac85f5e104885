package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPairedSurrogates(t *testing.T) {
	for doc, want := range map[string]bool{
		`{}`:                              true,
		`{"a":"plain é"}`:                 true,
		`{"a":"\ud83d\ude00"}`:            true, // 😀 as a pair
		`{"\ud83d\ude00":"\u00e9\u0000"}`: true,
		`{"a":"\\ud800"}`:                 true, // an escaped backslash, then text
		`{"a":"\\\ud83d\ude00"}`:          true,
		`{"a":"\"\ud83d\ude00"}`:          true,
		`{"a":"\ud800"}`:                  false,
		`{"a":"\udc00"}`:                  false,
		`{"a":"\ude00\ud83d"}`:            false, // low then high
		`{"a":"\ud83d\u0041"}`:            false,
		`{"a":"\ud83d","b":"\ude00"}`:     false,
		`{"a":"\\\ud800"}`:                false,
		`{"a":"x\uDBFF"}`:                 false, // upper-case hex
	} {
		require.Equal(t, want, pairedSurrogates([]byte(doc)), doc)
	}
}
