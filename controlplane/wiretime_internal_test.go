package controlplane

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/internal/wirejson"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// TestWireMirrors: each encoding mirror has its type's JSON fields, in the
// same order, with the same tags and types, time.Time as wirejson.Time. A field
// added to a wire type without its mirror fails here.
func TestWireMirrors(t *testing.T) {
	type field struct{ Name, Tag, Type string }
	fields := func(typ reflect.Type, skipEmbedded bool) []field {
		var out []field
		for f := range typ.Fields() {
			if f.Tag.Get("json") == "-" || (skipEmbedded && f.Anonymous) {
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
		{reflect.TypeFor[Deployment](), reflect.TypeFor[deploymentJSON]()},
		{reflect.TypeFor[Revision](), reflect.TypeFor[revisionJSON]()},
		{reflect.TypeFor[Listener](), reflect.TypeFor[listenerJSON]()},
	} {
		if d := cmp.Diff(fields(c.typ, true), fields(c.mirror, false)); d != "" {
			t.Errorf("%s and its mirror %s differ (-type +mirror):\n%s", c.typ, c.mirror, d)
		}
	}
}

// TestRecordsRoundTrip: the stored records keep every field through their
// own MarshalJSON (which must not be the promoted one of the wire type).
func TestRecordsRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 4, 5, 123_456_000, time.UTC)
	dep := deploymentRecord{Deployment: Deployment{ID: "d", Name: "n", Source: SourceGitHub, Secrets: []Secret{{"K", "V"}},
		CreatedAt: at, UpdatedAt: at.Add(time.Second), Status: StatusReady, ImageVersion: new("v1")}, Tags: []string{"x", "y"}}
	rev := revisionRecord{Revision: Revision{ID: "r", CreatedAt: at, UpdatedAt: at, Status: RevisionDeployed, Source: SourceGitHub},
		revisionSnapshot: revisionSnapshot{DeploymentID: "d", Secrets: []Secret{{"K", "V"}}, ResourceSpec: &ResourceSpec{MinScale: new(int64(2))},
			InstallCommand: new("i"), BuildCommand: new("b"), ImageVersion: new("v2")}}
	for _, v := range []any{&dep, &rev} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := json.Unmarshal(b, got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(v, got, cmp.AllowUnexported(revisionRecord{})); d != "" {
			t.Errorf("%T round trip (-want +got):\n%s", v, d)
		}
	}
	b, _ := json.Marshal(dep)
	wire, _ := json.Marshal(dep.wire())
	if want := string(wire[:len(wire)-1]) + `,"tag_value_ids":["x","y"]}`; string(b) != want {
		t.Errorf("stored deployment record = %s\nwant %s", b, want)
	}
}

// TestOlderTimestampsDecode: a record stored by an earlier build, with
// trimmed fractions, still decodes; GetDeploymentJSON serves its bytes as
// stored (the documented exception), GetDeployment re-encodes them.
func TestOlderTimestampsDecode(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	cp := New(st, nil)
	d, err := cp.CreateDeployment(ctx, "t1", &CreateDeploymentRequest{Name: new("a"), Source: new(SourceExternalDocker),
		SourceRevisionConfig: &SourceRevisionConfig{ImageURI: new("r/a:1")}})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Date(2026, 11, 21, 6, 45, 29, 677_250_000, time.UTC)
	var stored []byte
	err = st.Update(ctx, func(tx store.Tx) error {
		b, err := tx.Get(colDeployments, key("t1", d.ID))
		if err != nil {
			return err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		m["created_at"] = json.RawMessage(`"2026-11-21T06:45:29.67725Z"`)
		m["updated_at"] = json.RawMessage(`"2026-11-21T08:45:29.67725+02:00"`)
		// Keep the wire order with tag_value_ids last, as earlier builds did.
		rec, _ := json.Marshal(m["tag_value_ids"])
		delete(m, "tag_value_ids")
		var sb strings.Builder
		sb.WriteString("{")
		for i, k := range []string{"id", "name", "source", "source_config", "source_revision_config", "secrets", "created_at",
			"updated_at", "status", "latest_revision_id", "active_revision_id", "image_version"} {
			if i > 0 {
				sb.WriteString(",")
			}
			kb, _ := json.Marshal(k)
			sb.Write(kb)
			sb.WriteString(":")
			sb.Write(m[k])
		}
		sb.WriteString(`,"tag_value_ids":` + string(rec) + "}")
		stored = []byte(sb.String())
		return tx.Put(colDeployments, key("t1", d.ID), stored)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cp.GetDeployment(ctx, "t1", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(old) || !got.UpdatedAt.Equal(old) {
		t.Errorf("decoded created_at %v updated_at %v, want %v", got.CreatedAt, got.UpdatedAt, old)
	}
	b, _ := json.Marshal(got)
	if !strings.Contains(string(b), `"created_at":"2026-11-21T06:45:29.677250Z","updated_at":"2026-11-21T06:45:29.677250Z"`) {
		t.Errorf("GetDeployment re-encoded = %s, want six-digit UTC timestamps", b)
	}
	raw, err := cp.GetDeploymentJSON(ctx, "t1", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(stored[:strings.LastIndex(string(stored), `,"tag_value_ids":`)]) + "}"; string(raw) != want {
		t.Errorf("GetDeploymentJSON = %s\nwant the stored bytes %s", raw, want)
	}
}

// TestPagesEncodeAsTheirFields: a page's MarshalJSON gives what
// encoding/json gives for its fields (a method-less copy of the type),
// with nil, empty and full resources.
func TestPagesEncodeAsTheirFields(t *testing.T) {
	type plainDeploymentPage DeploymentPage
	type plainRevisionPage RevisionPage
	type plainListenerPage ListenerPage
	at := time.Date(2026, 11, 21, 10, 4, 5, 120_000_000, time.UTC)
	ds := []Deployment{{ID: "a<b>&", CreatedAt: at, Secrets: []Secret{}}, {ID: "b", UpdatedAt: at}}
	rs := []Revision{{ID: "r1", CreatedAt: at}, {ID: "r2", StatusMessage: new("\u2028 <x>")}}
	ls := []Listener{{ID: "l1", CreatedAt: at}}
	for _, c := range []struct {
		page, plain any
	}{
		{DeploymentPage{Resources: ds, Offset: 7}, plainDeploymentPage{Resources: ds, Offset: 7}},
		{DeploymentPage{Resources: []Deployment{}}, plainDeploymentPage{Resources: []Deployment{}}},
		{DeploymentPage{}, plainDeploymentPage{}},
		{RevisionPage{Resources: rs, Offset: 2}, plainRevisionPage{Resources: rs, Offset: 2}},
		{RevisionPage{}, plainRevisionPage{}},
		{ListenerPage{Resources: ls, Offset: 1}, plainListenerPage{Resources: ls, Offset: 1}},
		{ListenerPage{Resources: []Listener{}}, plainListenerPage{Resources: []Listener{}}},
	} {
		got, err := json.Marshal(c.page)
		if err != nil {
			t.Fatal(err)
		}
		direct, err := c.page.(json.Marshaler).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(c.plain)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) || string(direct) != string(want) {
			t.Errorf("%T: json.Marshal = %s\nMarshalJSON = %s\nwant %s", c.page, got, direct, want)
		}
	}
}
