package controlplane

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/storemem"
)

// fieldAt follows a loc of JSON names from t (a struct type) to the struct
// field it names, dereferencing pointers.
func fieldAt(t reflect.Type, loc []string) (reflect.StructField, bool) {
	var f reflect.StructField
	for _, name := range loc {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return f, false
		}
		found := false
		for i := range t.NumField() {
			if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n == name {
				f, found = t.Field(i), true
				break
			}
		}
		if !found {
			return f, false
		}
		t = f.Type
	}
	return f, true
}

// TestShapeLocsAreTableRows: a draft whose every tagged field is wrong
// gets one problem per tagged field, and validator's translated loc of each
// is the path of the rules table row it belongs to: the row's own loc for a
// field of the row, and below the row (by JSON names) for the fields of an
// object row (listener_config, resource_spec). Every row whose field has a
// shape tag is reported.
func TestShapeLocsAreTableRows(t *testing.T) {
	cp := New(storemem.New(), nil)
	bad := new("Not A Label!")
	d := &Deployment{Name: "-bad", DisplayName: new(""), SourceConfig: SourceConfig{
		IntegrationID: bad, RepoURL: new(""), DeploymentType: new(DeploymentType("huge")), CustomURL: new(strings.Repeat("x", 5000)),
		ResourceSpec: &ResourceSpec{MinScale: new(int64(-1)), CPU: new(0.0), MemoryMB: new(int64(0)), ServiceAccountName: bad},
		ListenerID:   bad, ListenerConfig: &ListenerConfig{K8sNamespace: bad}, InstallCommand: new(""), BuildCommand: new(""),
		Preview: &PreviewConfig{Mode: new(PreviewMode("some"))},
	}, SourceRevisionConfig: SourceRevisionConfig{RepoRef: new(""), GraphConfigPath: new(""), ImageURI: new(""), SourceTarballPath: new("")},
		Agent: &DeploymentAgent{AgentID: "a", Environment: "qa"}}
	ps := cp.shapes.problems([]any{"body"}, d)

	var got []string
	for _, p := range ps {
		row := ruleOfLoc(p.Loc)
		if row == len(rules) {
			t.Errorf("problem at %v is below no row of the rules table", p.Loc)
			continue
		}
		// The loc names, below its row, a field by its JSON names.
		var names []string
		for _, l := range p.Loc[1:] {
			names = append(names, l.(string))
		}
		if f, ok := fieldAt(reflect.TypeFor[Deployment](), names); !ok || f.Tag.Get("validate") == "" {
			t.Errorf("problem at %v names no tagged field", p.Loc)
		}
		got = append(got, strings.Join(rules[row].loc, "."))
	}
	var want []string
	for _, r := range rules {
		f, ok := fieldAt(reflect.TypeFor[Deployment](), r.loc)
		if !ok {
			t.Fatalf("row %v names no field of Deployment", r.loc)
		}
		tagged := f.Tag.Get("validate") != ""
		if et := f.Type; et.Kind() == reflect.Pointer && et.Elem().Kind() == reflect.Struct {
			for i := range et.Elem().NumField() {
				tagged = tagged || et.Elem().Field(i).Tag.Get("validate") != ""
			}
		}
		if tagged {
			want = append(want, strings.Join(r.loc, "."))
		}
	}
	// One problem per tagged field of the draft.
	got = slices.Compact(got) // in struct order, which is the rows' order
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows with shape problems (-want +got):\n%s", diff)
	}
	if len(ps) != 20 {
		t.Errorf("%d problems, want 20: %v", len(ps), ps)
	}
}

// TestShapeLoc: validator namespaces become locs with JSON names, ints for
// indexes and strings for map keys.
func TestShapeLoc(t *testing.T) {
	for ns, want := range map[string][]any{
		"Deployment.name": {"body", "name"},
		"Deployment.source_config.resource_spec.sidecars[0].env[12].name": {"body", "source_config", "resource_spec", "sidecars", 0, "env", 12, "name"},
		"ResourceSpec.labels[example.com/tier]":                           {"body", "labels", "example.com/tier"},
		"Container.command[3]":                                            {"body", "command", 3},
		"X.a[1][2]":                                                       {"body", "a", 1, 2},
	} {
		if diff := cmp.Diff(want, shapeLoc([]any{"body"}, ns)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", ns, diff)
		}
	}
}

// TestShapeNumberTags: every number of a ResourceSpec has a range tag whose
// upper bound is maxNumber.
func TestShapeNumberTags(t *testing.T) {
	rt := reflect.TypeFor[ResourceSpec]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		if k := f.Type.Kind(); k != reflect.Pointer || (f.Type.Elem().Kind() != reflect.Int64 && f.Type.Elem().Kind() != reflect.Float64) {
			continue
		}
		if tag := f.Tag.Get("validate"); !strings.HasSuffix(tag, ",lte="+strconv.Itoa(maxNumber)) {
			t.Errorf("%s: tag %q should end with lte=%d", f.Name, tag, maxNumber)
		}
	}
}
