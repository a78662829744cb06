package imagebuild

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

// The want strings are Python 3's json.dumps(json.loads(in)).
func TestDumpsLikePython(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a": 1, "b": [true, false, null], "c": "x"}`, `{"a": 1, "b": [true, false, null], "c": "x"}`},
		{`{"z": 1, "a": 2, "z": 3}`, `{"z": 3, "a": 2}`},
		{`[1.0, 1.5, 0.1, 1e5, 1e16, 1E-5, 0.0001, 123456789012345678901234567890, -0.0, 2.5e-10, 1e300, 100.0, 1.23456789012345678]`,
			`[1.0, 1.5, 0.1, 100000.0, 1e+16, 1e-05, 0.0001, 123456789012345678901234567890, -0.0, 2.5e-10, 1e+300, 100.0, 1.2345678901234567]`},
		{`"caf\u00e9 \ud83d\ude00 \u0001 \"q\" \\ / \n\t\r\b\f"`, `"caf\u00e9 \ud83d\ude00 \u0001 \"q\" \\ / \n\t\r\b\f"`},
		{`"é中"`, `"\u00e9\u4e2d"`},
		{`{}`, `{}`},
		{`[]`, `[]`},
		{`{"nested": {"x": [{"y": {}}]}}`, `{"nested": {"x": [{"y": {}}]}}`},
		{`12345678901234567890`, `12345678901234567890`},
		{`-1.5E+3`, `-1500.0`},
		{`-0`, `0`},
	} {
		v, err := parseJSON([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got := v.dumps(); got != tc.want {
			t.Errorf("dumps(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{``, `{`, `{"a": 1} x`, `[1,]`, strings.Repeat("[", 200) + strings.Repeat("]", 200)} {
		if _, err := parseJSON([]byte(bad)); err == nil {
			t.Errorf("parseJSON(%q) succeeded", bad)
		}
	}
}

// FuzzDumps: whatever JSON parseJSON accepts, dumps writes JSON that
// means the same (numbers compared as float64).
func FuzzDumps(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5, "x\u00e9"], "b": null}`, `1e5`, `"\ud83d\ude00"`, `{"a":{"a":{}}}`, `[true,false]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := parseJSON(data)
		if err != nil {
			return
		}
		out := v.dumps()
		var want, got any
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("parseJSON accepted %q, encoding/json refuses it: %v", data, err)
		}
		if strings.Contains(out, "Infinity") {
			return // Python writes out-of-range floats so too; not JSON
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("dumps(%q) = %q, not JSON: %v", data, out, err)
		}
		if !sameJSON(want, got) { // both keep the last of repeated keys

			t.Fatalf("dumps(%q) = %q: %#v, want %#v", data, out, got, want)
		}
	})
}

func sameJSON(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || math.Abs(x-y) <= 1e-12*math.Abs(x))
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !sameJSON(v, y[k]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}
