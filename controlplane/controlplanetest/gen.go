package controlplanetest

import (
	"fmt"
	"slices"
	"strings"

	"pgregory.net/rapid"
)

// Generators of request values. Each draws a JSON value (nil: absent) for
// a field, valid or invalid, with varied spellings, and the model decides
// validity from its own rules (policy.go), never from the control plane's.

// rarely is true one time in n.
func rarely(rt *rapid.T, n int, label string) bool { return rapid.IntRange(1, n).Draw(rt, label) == 1 }

func pick[V any](rt *rapid.T, label string, vs ...V) V { return rapid.SampledFrom(vs).Draw(rt, label) }

// A request is drawn clean (valid as far as the generators can tell) or
// with one fault: startRequest draws which of the request's fault sites
// (the calls of oops, in order) fires, if any. One fault at a time keeps
// each rule decisive: a request with many faults is refused whichever
// rule the control plane gets wrong.

// startRequest begins drawing a request: clean two times in three.
func (m *machine) startRequest(rt *rapid.T) {
	m.sites, m.faultAt = 0, -1
	if rarely(rt, 3, "faulty") {
		m.faultAt = rapid.IntRange(0, 23).Draw(rt, "fault site")
	}
}

// clean says the request being drawn has no fault.
func (m *machine) clean() bool { return m.faultAt < 0 }

// oops is a fault site: it says whether the fault is here.
func (m *machine) oops() bool {
	i := m.sites
	m.sites++
	return i == m.faultAt
}

// choose is a fault site: it picks from bad when the fault is here, else
// from good.
func choose[V any](m *machine, rt *rapid.T, label string, good []V, bad ...V) V {
	if m.oops() {
		return pick(rt, label+" (bad)", bad...)
	}
	return pick(rt, label, good...)
}

// genName draws a deployment name: from a small pool (so that names
// clash), any valid name, or an invalid one. nonEmpty leaves out "".
func (m *machine) genName(rt *rapid.T, nonEmpty bool) string {
	if !m.oops() {
		switch rapid.IntRange(0, 7).Draw(rt, "name kind") {
		case 0, 1, 2, 3:
			return pick(rt, "pooled name", "a", "b", "agent-1", "x_y.2")
		case 4, 5, 6:
			return rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9._-]{0,20}`).Draw(rt, "valid name")
		}
		return "n" + strings.Repeat(pick(rt, "fill", "x", "-", "."), 62) // 63: the longest
	}
	bad := []string{"n" + strings.Repeat("x", 63), ".a", "_a", "-a", "a b", "a/b", "a@b", "é", "a:b", "a\n"}
	if !nonEmpty {
		bad = append(bad, "")
	}
	return pick(rt, "invalid name", bad...)
}

var (
	repoOwners = []string{"acme", "Acme", "octo-org"}
	repoNames  = []string{"a", "b", "agent", "my.repo"}
	// branches: names, with and without slashes, some that look like tags
	// but are not refs/tags/ refs.
	branches = []string{"main", "dev", "feature/x-1", "release/2.0", "tags/v1", "v1"}
	// tags, with and without a v.
	tags = []string{"refs/tags/v1", "refs/tags/v2.0", "refs/tags/release-1", "refs/tags/1.0"}
)

func (m *machine) genRepoURL(rt *rapid.T) string {
	if m.oops() {
		return ""
	}
	owner, repo := pick(rt, "owner", repoOwners...), pick(rt, "repo", repoNames...)
	return pick(rt, "url form", "https://github.com/"+owner+"/"+repo, "https://github.com/"+owner+"/"+repo+".git",
		"git@github.com:"+owner+"/"+repo+".git")
}

func (m *machine) genRef(rt *rapid.T) string {
	if m.oops() {
		return ""
	}
	switch rapid.IntRange(0, 10).Draw(rt, "ref kind") {
	case 0, 1, 2, 3:
		return pick(rt, "tag", tags...)
	}
	return pick(rt, "branch", branches...)
}

// value draws from good, or one time in eight bad (which is invalid).
func (m *machine) value(rt *rapid.T, label string, bad string, good ...string) (string, bool) {
	if m.oops() {
		return bad, false
	}
	return pick(rt, label, good...), true
}

// genSecrets draws 0..3 secrets with valid or invalid names and values of
// every kind: empty, unicode, multi-line, missing, null.
func (m *machine) genSecrets(rt *rapid.T) []any {
	names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"A", "B", "API_KEY", "_x", "a1"}), 0, 3, rapid.ID).Draw(rt, "secret names")
	if len(names) > 0 && m.oops() {
		names[len(names)-1] = pick(rt, "invalid secret name", "", "1A", "A-B", "A B", names[0])
	}
	out := []any{}
	for _, name := range names {
		s := map[string]any{"name": name}
		switch {
		case m.oops():
			// no value: 422 missing (seed: value is required)
			if rapid.Bool().Draw(rt, "null value") {
				s["value"] = nil
			}
		default:
			s["value"] = pick(rt, "secret value", "", "v", "é ü", "line1\nline2", "a=b", "s3cr3t")
		}
		out = append(out, s)
	}
	return out
}

// genSpec draws a resource_spec: a few numbers (mostly in range, so that
// the orderings are what decides), and sometimes Kubernetes sub-objects,
// valid or not.
func (m *machine) genSpec(rt *rapid.T) map[string]any {
	spec := map[string]any{}
	for range rapid.IntRange(0, 3).Draw(rt, "numbers") {
		switch k := pick(rt, "number field", slices.Concat(specScales, specCPUs, specMemory, specOther)...); {
		case contains(specScales, k):
			spec[k] = float64(choose(m, rt, k, []int{0, 1, 2, 3, 5}, -1))
		case contains(specCPUs, k):
			spec[k] = choose(m, rt, k, []float64{0.25, 0.5, 1, 1.5, 2, 4}, 0, -1)
		case contains(specMemory, k):
			spec[k] = float64(choose(m, rt, k, []int{128, 256, 512, 1024, 2048}, 0, -5))
		default:
			spec[k] = float64(pick(rt, k, 1, 10, 100))
		}
	}
	if rarely(rt, 3, "volumes") {
		var vols []any
		names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"data", "cache", "v-1"}), 1, 2, rapid.ID).Draw(rt, "volume names")
		if m.oops() {
			names = append(names, pick(rt, "bad volume name", "Data", "", names[0]))
		}
		for _, name := range names {
			vols = append(vols, pick(rt, "volume source", map[string]any{"name": name, "emptyDir": map[string]any{}},
				map[string]any{"name": name, "configMap": map[string]any{"name": "cm"}}))
		}
		spec["volumes"] = vols
		if rapid.Bool().Draw(rt, "mounts") {
			spec["volume_mounts"] = []any{map[string]any{"name": choose(m, rt, "mount name", names, "ghost"),
				"mountPath": choose(m, rt, "mount path", []string{"/data", "/var/cache"}, "")}}
		}
	}
	for _, k := range []string{"init_containers", "sidecars"} {
		if !rarely(rt, 4, k) {
			continue
		}
		c := map[string]any{"name": choose(m, rt, k+" name", []string{k[:4] + "-1", k[:4] + "-2"}, "Side_1"),
			"image": choose(m, rt, "image", []string{"busybox:1", "ghcr.io/acme/proxy@sha256:" + strings.Repeat("ab", 32)}, "")}
		if rarely(rt, 3, "pull policy") {
			c["imagePullPolicy"] = choose(m, rt, "pull policy", []string{"Always", "IfNotPresent", "Never"}, "Sometimes")
		}
		if rarely(rt, 3, "env") {
			e := map[string]any{"name": choose(m, rt, "env name", []string{"FOO", "_BAR1"}, "1X", "A-B"), "value": pick(rt, "env value", "1", "")}
			if rapid.Bool().Draw(rt, "valueFrom") {
				e["valueFrom"] = map[string]any{"secretKeyRef": map[string]any{"name": "s", "key": "k"}}
				if !m.oops() {
					e["value"] = "" // value and valueFrom are exclusive
				}
			}
			c["env"] = []any{e}
		}
		if rarely(rt, 3, "resources") {
			c["resources"] = map[string]any{"limits": map[string]any{"cpu": "1", "memory": "256Mi"}, "requests": map[string]any{"cpu": "500m"}}
		}
		spec[k] = []any{c}
	}
	if rarely(rt, 4, "labels") {
		spec["labels"] = map[string]any{"app": "agent", "team": pick(rt, "team", "a", "b-2")}
	}
	if rarely(rt, 6, "pull secrets") {
		spec["image_pull_secrets"] = []any{map[string]any{"name": "regcred"}}
	}
	return spec
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// gen draws a value for the field at key (a modelFields key) for tenant,
// and whether the value is valid on its own (references are checked by the
// caller against the model: they depend on the tenant and the listener).
func (m *machine) gen(rt *rapid.T, tenant, key string) (any, bool) {
	switch key {
	case "name":
		s := m.genName(rt, false)
		return s, nameOK(s)
	case "source":
		return pick(rt, "source", github, externalDocker), true
	case "source_config.integration_id":
		other := m.integ[otherTenant(tenant)]
		v := choose(m, rt, "integration", []string{m.integ[tenant]}, m.integ[tenant], m.integ[tenant], other, unknownID, "not-a-uuid")
		return v, v == m.integ[tenant]
	case "source_config.repo_url":
		s := m.genRepoURL(rt)
		return s, s != ""
	case "source_config.deployment_type":
		return m.value(rt, "deployment type", pick(rt, "bad type", "staging", "PROD"), "dev_free", "dev", "prod")
	case "source_config.build_on_push":
		return rapid.Bool().Draw(rt, key), true
	case "source_config.custom_url":
		return m.value(rt, "custom url", "", "https://a.example", "http://agent.internal:8080/x")
	case "source_config.resource_spec":
		s := m.genSpec(rt)
		return s, specOK(s)
	case "source_config.listener_id":
		v := choose(m, rt, "listener", []string{m.lis[tenant][0], m.lis[tenant][1]}, m.lis[tenant][0], m.lis[otherTenant(tenant)][0], unknownID, "nope")
		return v, v == m.lis[tenant][0] || v == m.lis[tenant][1]
	case "source_config.listener_config":
		// Checked by the caller, against the listener named beside it (a
		// clean draw may still name a namespace its listener lacks).
		return map[string]any{"k8s_namespace": choose(m, rt, "namespace", []string{"ns-a", "ns-b", "ns-z"}, "Bad_NS")}, true
	case "source_config.install_command", "source_config.build_command":
		return m.value(rt, key, "", "npm ci", "pnpm i --frozen-lockfile", "yarn && yarn build")
	case "source_revision_config.repo_ref":
		s := m.genRef(rt)
		return s, s != ""
	case "source_revision_config.graph_config_path":
		return m.value(rt, "graph path", "", "langgraph.json", "apps/agent/langgraph.json", "./graphs/g.json")
	case "source_revision_config.image_uri":
		return m.value(rt, "image", "", "r/a:1", "ghcr.io/acme/agent:v2", "registry.example:5000/x/y@sha256:"+strings.Repeat("0f", 32))
	case "source_revision_config.repo_commit_sha":
		return pick(rt, "sha", "abc123", ""), true
	case "secrets":
		s := m.genSecrets(rt)
		ok, _ := secretsOK(s)
		return s, ok
	}
	rt.Fatalf("controlplanetest: no generator for field %s: add one", key)
	return nil, false
}

func otherTenant(t string) string {
	if t == tenants[0] {
		return tenants[1]
	}
	return tenants[0]
}

// tagPool are the tag value ids deployments carry (create extension).
var tagPool = []string{"7a0e0000-0000-4000-8000-000000000001", "7a0e0000-0000-4000-8000-000000000002", "7a0e0000-0000-4000-8000-000000000003"}

// genTagIDs draws tag_value_ids for a create: nil, some of tagPool, or a
// list with a value that is not a UUID.
func (m *machine) genTagIDs(rt *rapid.T) ([]any, bool) {
	if rapid.Bool().Draw(rt, "no tags") {
		return nil, true
	}
	ids := rapid.SliceOfNDistinct(rapid.SampledFrom(tagPool), 0, 3, rapid.ID).Draw(rt, "tags")
	out := []any{}
	for _, id := range ids {
		out = append(out, id)
	}
	if m.oops() {
		return append(out, "tag-1"), false
	}
	return out, true
}

// sha draws a fresh commit sha: every push names another commit.
func (m *machine) sha() string {
	m.pushes++
	return fmt.Sprintf("%040x", m.pushes)
}
