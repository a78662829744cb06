package controlplanetest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/controlplane"
)

// TestModelTableAgrees compares the model's own statement of the field
// policies with controlplane.FieldRules, row by row. The machine never
// reads FieldRules (a wrong rule there would be copied into the model's
// predictions); this test makes a change to either table a visible
// decision.
func TestModelTableAgrees(t *testing.T) {
	createOf := map[controlplane.CreatePolicy]createPolicy{
		controlplane.CreateNotApplicable: cNA, controlplane.CreateRequired: cRequired, controlplane.CreateOptional: cOptional,
		controlplane.CreateReadOnly: cReadOnly, controlplane.CreateIgnored: cIgnored,
	}
	patchOf := map[controlplane.PatchPolicy]patchPolicy{
		controlplane.PatchNotApplicable: pNA, controlplane.PatchImmutable: pImmutable, controlplane.PatchInPlace: pInPlace,
		controlplane.PatchRevision: pRevision, controlplane.PatchReadOnly: pReadOnly, controlplane.PatchIgnored: pIgnored,
	}
	var got []fieldPolicy
	for _, r := range controlplane.FieldRules() {
		f := fieldPolicy{loc: r.Loc}
		for i, s := range sources {
			f.create[i] = createOf[r.Create[controlplane.Source(s)]]
			f.patch[i] = patchOf[r.Patch[controlplane.Source(s)]]
		}
		got = append(got, f)
	}
	key := func(fs []fieldPolicy) map[string]fieldPolicy {
		out := map[string]fieldPolicy{}
		for _, f := range fs {
			out[strings.Join(f.loc, ".")] = f
		}
		return out
	}
	if d := cmp.Diff(key(modelFields), key(got), cmp.AllowUnexported(fieldPolicy{})); d != "" {
		t.Errorf("the model's table and controlplane.FieldRules differ (-model +FieldRules):\n%s", d)
	}
}

// TestModelRules spot-checks the model's value rules against the
// contract's examples.
func TestModelRules(t *testing.T) {
	for _, c := range []struct {
		what string
		got  bool
		want bool
	}{
		{"name a", nameOK("a"), true},
		{"name of 63", nameOK("a" + strings.Repeat("-", 62)), true},
		{"name of 64", nameOK(strings.Repeat("a", 64)), false},
		{"name starting with .", nameOK(".a"), false},
		{"name with /", nameOK("a/b"), false},
		{"tag refs/tags/v1", isTag("refs/tags/v1"), true},
		{"tag refs/tags/release-1", isTag("refs/tags/release-1"), true},
		{"branch tags/v1", isTag("tags/v1"), false},
		{"branch feature/x", isTag("feature/x"), false},
		{"spec min > max", specOK(map[string]any{"min_scale": 3.0, "max_scale": 1.0}), false},
		{"spec queue min > default max", specOK(map[string]any{"queue_min_scale": 3.0, "max_scale": 1.0}), false},
		{"spec cpu 0.5", specOK(map[string]any{"cpu": 0.5}), true},
		{"spec cpu 0", specOK(map[string]any{"cpu": 0.0}), false},
		{"spec limit < request", specOK(map[string]any{"cpu": 2.0, "cpu_limit": 1.0}), false},
		{"spec queue limit < default request", specOK(map[string]any{"cpu": 2.0, "queue_cpu_limit": 1.0}), false},
		{"spec limit = 2x default", specOK(map[string]any{"memory_mb": 512.0}), true},
		{"spec mount of no volume", specOK(map[string]any{"volume_mounts": []any{map[string]any{"name": "v", "mountPath": "/v"}}}), false},
		{"repo spellings", normRepo("git@github.com:Acme/a.git") == normRepo("HTTP://GitHub.com/acme/a.git/"), true},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
}
