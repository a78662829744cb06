package oauthflow_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
)

func countRecords(t testing.TB, st store.Store, coll string) int {
	t.Helper()
	records, err := storetest.Dump(context.Background(), st, coll)
	if err != nil {
		t.Fatal(err)
	}
	return len(records[coll])
}

// dump returns every record of the package's collections under
// "collection/key", each value followed by the base64-decoded strings
// inside it.
func dump(t testing.TB, st store.Store) map[string]string {
	t.Helper()
	records, err := storetest.Dump(context.Background(), st, oauthflow.Collections()...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for coll, recs := range records {
		for k, v := range recs {
			out[coll+"/"+k] = v + "\n" + decodedStrings([]byte(v))
		}
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
