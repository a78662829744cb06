package controlplane

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/storemem"
)

// TestShapeTagsAsPlainChecks: on random create requests, good and bad,
// the checks with shape tags give the very problems (locs, types,
// messages, order) and the same draft as the plain checks of
// checkCreateBefore (shape_bench_internal_test.go), their reference.
func TestShapeTagsAsPlainChecks(t *testing.T) {
	cp := New(storemem.New(), &Options{Limits: Limits{MaxItems: 3, MaxStringBytes: 12, MaxSecretValueBytes: 6}})
	pick := func(t *rapid.T, label string, vs ...string) string { return rapid.SampledFrom(vs).Draw(t, label) }
	obj := func(t *rapid.T, label string, members map[string][]string) string {
		var parts []string
		for _, k := range sortedKeys(members) {
			if v := pick(t, label+"."+k, append([]string{""}, members[k]...)...); v != "" {
				parts = append(parts, `"`+k+`": `+v)
			}
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	list := func(t *rapid.T, label string, item func(*rapid.T, string) string) string {
		n := rapid.IntRange(0, 4).Draw(t, label+".n")
		items := make([]string, n)
		for i := range items {
			items[i] = item(t, label)
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
	strs := []string{`null`, `""`, `"ok"`, `"much-too-long-string"`}
	names := []string{`""`, `"a"`, `"b"`, `"Bad Name"`, `"x-1"`, `"1BAD"`, `"OK_1"`}
	nums := []string{`null`, `-1`, `0`, `1`, `2`, `0.5`, `3000000000`}
	rapid.Check(t, func(t *rapid.T) {
		mount := func(t *rapid.T, l string) string {
			return obj(t, l, map[string][]string{"name": names, "mountPath": strs, "subPath": strs, "subPathExpr": strs})
		}
		env := func(t *rapid.T, l string) string {
			return obj(t, l, map[string][]string{"name": names, "value": strs, "valueFrom": {`{}`, `null`}})
		}
		container := func(t *rapid.T, l string) string {
			return obj(t, l, map[string][]string{"name": names, "image": strs, "imagePullPolicy": {`"Always"`, `"Sometimes"`},
				"restartPolicy": {`"Always"`, `"Never"`}, "workingDir": strs, "args": {`["a", "much-too-long-string"]`},
				"env": {list(t, l+".env", env)}, "volumeMounts": {list(t, l+".mounts", mount)}})
		}
		spec := obj(t, "spec", map[string][]string{
			"min_scale": nums, "max_scale": nums, "queue_max_scale": nums, "cpu": nums, "cpu_limit": nums, "memory_mb": nums,
			"db_cpu": nums, "db_storage_gi": nums, "memory_limit_mb": nums, "labels": {`{"a": "b", "-x": "y"}`},
			"service_account_name": {`"sa"`, `"Bad SA"`}, "image_pull_secrets": {`[{"name": "r"}, {}, {"name": "R R"}]`},
			"volumes":       {list(t, "volumes", func(t *rapid.T, l string) string { return obj(t, l, map[string][]string{"name": names}) })},
			"volume_mounts": {list(t, "mounts", mount)},
			"sidecars":      {list(t, "sidecars", container)}, "init_containers": {list(t, "inits", container)},
		})
		body := obj(t, "body", map[string][]string{
			"name": {`"agent"`, `"-bad"`}, "source": {`"github"`, `"external_docker"`, `"internal_source"`, `"internal_docker"`, `"x"`},
			"source_config": {obj(t, "sc", map[string][]string{"integration_id": {`"not-a-uuid"`, `"0190A2B4-0000-7000-8000-000000000001"`},
				"repo_url": strs, "deployment_type": {`"dev"`, `"huge"`}, "resource_spec": {spec}, "listener_id": {`"x"`},
				"listener_config": {`{"k8s_namespace": "ns"}`, `{"k8s_namespace": "Bad NS"}`}, "install_command": strs, "build_on_push": {`true`}})},
			"source_revision_config": {obj(t, "src", map[string][]string{"repo_ref": strs, "image_uri": strs, "graph_config_path": strs, "source_tarball_path": strs,
				"langgraph_config_path": strs})},
			"secrets": {list(t, "secrets", func(t *rapid.T, l string) string {
				return obj(t, l, map[string][]string{"name": names, "value": {`null`, `""`, `"v"`, `"too-long-value"`}})
			})},
		})
		var req, req2 CreateDeploymentRequest
		if json.Unmarshal([]byte(body), &req) != nil {
			return // a decimal in an integer field: the decoder's problem
		}
		_ = json.Unmarshal([]byte(body), &req2)
		wd, wt, wps := cp.checkCreateBefore(&req)
		gd, gt, gps := cp.checkCreate(&req2)
		if diff := cmp.Diff(wps, gps); diff != "" {
			t.Fatalf("%s\nproblems (-plain +tags):\n%s", body, diff)
		}
		if diff := cmp.Diff(wd, gd); diff != "" {
			t.Fatalf("%s\ndraft (-plain +tags):\n%s", body, diff)
		}
		if diff := cmp.Diff(wt, gt); diff != "" {
			t.Fatalf("%s\ntags (-plain +tags):\n%s", body, diff)
		}
	})
}
