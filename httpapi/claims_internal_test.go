package httpapi

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// claimsPayloads are token payloads that Claims.UnmarshalJSON accepts (ok)
// or refuses, both through claimsRules and, for escaped keys, through
// claimsRulesUnescaped.
var claimsPayloads = []struct {
	payload string
	ok      bool
}{
	{`{"sub":"alice","exp":4102444800}`, true},
	{` {"sub":"alice","exp":4102444800,"iat":-1,"nbf":0.5} `, true},
	{`{"sub":"a","exp":4102444800,"roles":["admin","x"],"aud":["a","b"],"x":{"exp":"not a time here"}}`, true},
	{`{"sub":"a\"b","exp":4102444800,"e\\xp":"s"}`, true},
	{`{"sub":"a","exp":4102444800,"nested":[{"a":1,"b":{"a":2}},{"a":3}],"t":true,"f":false,"n":null}`, true},
	{`{"sub":"alice","exp":"4102444800"}`, false},
	{`{"sub":"alice","exp":4102444800,"nbf":"0"}`, false},
	{`{"sub":"alice","exp":4102444800,"iat":null}`, false},
	{`{"sub":"alice","exp":4102444800,"iat":true}`, false},
	{`{"sub":"alice","sub":"bob","exp":4102444800}`, false},
	{`{"sub":"alice","exp":4102444800,"roles":[],"roles":["admin"]}`, false},
	{`{"sub":"alice","exp":4102444800,"x":[{"a":1,"a":2}]}`, false},
	{`{"sub":"alice","exp":4102444800,"x":{"y":{"a":1,"b":2,"a":3}}}`, false},
	{`{"s\u0075b":"alice","sub":"bob","exp":4102444800}`, false},
	{`{"sub":"alice","\u0065xp":"4102444800"}`, false},
	{`{"sub":"alice","\u0065xp":4102444800}`, true},
	{`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":0,"exp":1}`, false},
	{`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k18":0,"exp":1}`, true},
	{`["sub","exp"]`, false},
	{`null`, false},
	{`"claims"`, false},
}

func TestClaimsUnmarshalJSONRules(t *testing.T) {
	for _, p := range claimsPayloads {
		var c Claims
		err := json.Unmarshal([]byte(p.payload), &c)
		if p.ok {
			require.NoError(t, err, p.payload)
		} else {
			require.Error(t, err, p.payload)
		}
	}
}

// FuzzClaimsRules checks that the one walk of claimsRules refuses exactly
// the JSON objects that the unescaping walk of claimsRulesUnescaped
// refuses, whenever it decides (no escaped key).
func FuzzClaimsRules(f *testing.F) {
	for _, p := range claimsPayloads {
		f.Add(p.payload)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		b := []byte(payload)
		var top map[string]json.RawMessage
		if !json.Valid(b) || json.Unmarshal(b, &top) != nil || top == nil {
			return // not an object: refused by the decoding of the claims first
		}
		fast := claimsRules(b)
		if errors.Is(fast, errEscapedKey) {
			return
		}
		slow := claimsRulesUnescaped(b)
		if (fast == nil) != (slow == nil) {
			t.Fatalf("claimsRules(%s) = %v, claimsRulesUnescaped = %v", b, fast, slow)
		}
	})
}
