package oauthflow

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/internal/wirejson"
)

// TestProviderMirror: providerJSON has Provider's fields in the same
// order, with the same tags and types (time.Time as wirejson.Time), and
// providerRecordRest the fields providerRecord adds.
func TestProviderMirror(t *testing.T) {
	type field struct{ Name, Tag, Type string }
	fields := func(typ reflect.Type) []field {
		var out []field
		for f := range typ.Fields() {
			if f.Anonymous {
				continue
			}
			ft := f.Type.String()
			if f.Type == reflect.TypeFor[wirejson.Time]() {
				ft = reflect.TypeFor[time.Time]().String()
			}
			out = append(out, field{f.Name, string(f.Tag), ft})
		}
		return out
	}
	for _, c := range []struct{ typ, mirror reflect.Type }{
		{reflect.TypeFor[Provider](), reflect.TypeFor[providerJSON]()},
		{reflect.TypeFor[providerRecord](), reflect.TypeFor[providerRecordRest]()},
	} {
		if d := cmp.Diff(fields(c.typ), fields(c.mirror)); d != "" {
			t.Errorf("%s and its mirror %s differ (-type +mirror):\n%s", c.typ, c.mirror, d)
		}
	}
}

// TestProviderRecordRoundTrip: the stored record keeps its sealed secret
// (Provider's MarshalJSON is not the one used), and has none when empty.
func TestProviderRecordRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 4, 5, 123_456_000, time.UTC)
	for _, rec := range []providerRecord{
		{Provider: Provider{ID: "p", ProviderID: "github", CreatedAt: at, UpdatedAt: at}, SealedSecret: []byte{1, 2, 3}},
		{Provider: Provider{ID: "p", ProviderID: "github", CreatedAt: at, UpdatedAt: at}},
	} {
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var got providerRecord
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(rec, got); d != "" {
			t.Errorf("round trip of %s (-want +got):\n%s", b, d)
		}
	}
}
