package oauthflow_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/store"
)

func countRecords(t testing.TB, st store.Store, coll string) int {
	t.Helper()
	n := 0
	err := st.View(context.Background(), func(r store.Reader) error {
		n = 0
		return r.Scan(coll, "", nil, func(string, []byte) (bool, error) { n++; return true, nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// dump returns every key and value of the package's collections.
func dump(t testing.TB, st store.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := st.View(context.Background(), func(r store.Reader) error {
		clear(out)
		for _, coll := range oauthflow.Collections() {
			err := r.Scan(coll, "", nil, func(k string, v []byte) (bool, error) {
				out[coll+"/"+k] = string(v) + "\n" + decodedStrings(v)
				return true, nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodedStrings returns, one per line, every string inside a JSON record
// that is valid base64, decoded: []byte fields are base64 in JSON, and a
// secret stored there unencrypted must not hide behind the encoding.
func decodedStrings(record []byte) string {
	var v any
	if json.Unmarshal(record, &v) != nil {
		return ""
	}
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if d, err := base64.StdEncoding.DecodeString(v); err == nil {
				b.Write(d)
				b.WriteByte('\n')
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return b.String()
}
