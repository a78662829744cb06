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
// with one fault of a kind drawn first: startRequest draws the kind, and
// the fault sites of that kind (calls of oops, in order) each fire with
// the odds they give until one has. One fault at a time keeps each rule
// decisive (a request with many faults is refused whichever rule the
// control plane gets wrong), and drawing the kind first gives every kind
// its share, wherever its sites fall in the request.

// faultKinds are the kinds of fault a request may carry.
var faultKinds = []string{
	"source",  // a bad source
	"name",    // a bad name
	"drop",    // a required field left out
	"refused", // a field that does not apply, or is read-only, sent
	"value",   // a bad value of a field (strings, enums, references, namespaces)
	"secret",  // a bad secret name, a duplicate, a missing value
	"spec",    // a resource_spec number or Kubernetes sub-object out of its rules
	"alias",   // langgraph_config_path different from graph_config_path
	"tags",    // a tag value id that is not a UUID
}

// startRequest begins drawing a request: clean two times in three.
func (m *machine) startRequest(rt *rapid.T) {
	m.fault, m.fired = "", false
	if rarely(rt, 3, "faulty") {
		m.fault = pick(rt, "fault kind", faultKinds...)
	}
}

// faultIn says the request's fault is of the kind of the field at key
// (which must then be sent, for the fault to be in it).
func (m *machine) faultIn(key string) bool {
	return m.fault == "secret" && (key == "secrets" || key == "secret_references") || m.fault == "spec" && key == "source_config.resource_spec"
}

// clean says the request being drawn has no fault.
func (m *machine) clean() bool { return m.fault == "" }

// oops is a fault site of kind: it says whether the fault is here, which
// it is one time in n while the request's fault of that kind has not fired.
func (m *machine) oops(rt *rapid.T, kind string, n int) bool {
	if m.fault != kind || m.fired || !rarely(rt, n, "fault here") {
		return false
	}
	m.fired = true
	return true
}

// choose is a fault site of kind "value": it picks from bad when the
// fault is here, else from good.
func choose[V any](m *machine, rt *rapid.T, label string, good []V, bad ...V) V {
	if m.oops(rt, "value", 2) {
		return pick(rt, label+" (bad)", bad...)
	}
	return pick(rt, label, good...)
}

// chooseSpec is choose for resource_spec sites (kind "spec").
func chooseSpec[V any](m *machine, rt *rapid.T, label string, good []V, bad ...V) V {
	if m.oops(rt, "spec", 3) {
		return pick(rt, label+" (bad)", bad...)
	}
	return pick(rt, label, good...)
}

// genName draws a deployment name: from a small pool (so that names
// clash), any valid name, or an invalid one. nonEmpty leaves out "".
func (m *machine) genName(rt *rapid.T, nonEmpty bool) string {
	if !m.oops(rt, "name", 1) {
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
	if m.oops(rt, "value", 3) {
		return ""
	}
	owner, repo := pick(rt, "owner", repoOwners...), pick(rt, "repo", repoNames...)
	return pick(rt, "url form", "https://github.com/"+owner+"/"+repo, "https://github.com/"+owner+"/"+repo+".git",
		"git@github.com:"+owner+"/"+repo+".git")
}

func (m *machine) genRef(rt *rapid.T) string {
	if m.oops(rt, "value", 3) {
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
	if m.oops(rt, "value", 3) {
		return bad, false
	}
	return pick(rt, label, good...), true
}

// genRefs draws 0..2 secret references, from names apart from
// genSecrets' but for a fault that takes a secret's name; or one bad
// reference (a bad name, secret name or key, a duplicate).
func (m *machine) genRefs(rt *rapid.T) []any {
	names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"REF_A", "DB_PASSWORD", "_TOKEN"}), 0, 2, rapid.ID).Draw(rt, "reference names")
	out := []any{}
	for _, name := range names {
		out = append(out, map[string]any{"name": name, "secret_name": pick(rt, "secret name", "db-creds", "api.keys"),
			"secret_key": pick(rt, "secret key", "password", "api-key", "tls.crt", "A_B")})
	}
	if len(out) > 0 && m.oops(rt, "secret", 1) {
		r := out[len(out)-1].(map[string]any)
		switch rapid.IntRange(0, 4).Draw(rt, "reference fault") {
		case 0:
			r["name"] = pick(rt, "bad reference name", "1X", "A-B", "")
		case 1:
			r["secret_name"] = pick(rt, "bad secret name", "Bad_Name", "", "-x")
		case 2:
			r["secret_key"] = pick(rt, "bad secret key", "a/b", "", "é")
		case 3:
			out = append(out, map[string]any{"name": r["name"], "secret_name": "x", "secret_key": "y"})
		default:
			r["name"] = pick(rt, "a secret's name", "A", "B", "API_KEY") // may clash with a secret
		}
	}
	return out
}

// genSecrets draws 0..3 secrets with valid or invalid names and values of
// every kind: empty, unicode, multi-line, missing, null.
func (m *machine) genSecrets(rt *rapid.T) []any {
	least := 0
	if m.fault == "secret" {
		least = 1 // room for the fault
	}
	names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"A", "B", "API_KEY", "_x", "a1"}), least, 3, rapid.ID).Draw(rt, "secret names")
	noValue := -1 // the secret without a value
	if len(names) > 0 && m.oops(rt, "secret", 1) {
		switch i := len(names) - 1; rapid.IntRange(0, 2).Draw(rt, "secret fault") {
		case 0:
			names[i] = pick(rt, "invalid secret name", "", "1A", "A-B", "A B", "É")
		case 1:
			names = append(names, names[i]) // a duplicate
		default:
			noValue = i // 422 missing (seed: value is required)
		}
	}
	out := []any{}
	for i, name := range names {
		s := map[string]any{"name": name, "value": pick(rt, "secret value", "", "v", "é ü", "line1\nline2", "a=b", "s3cr3t")}
		if i == noValue {
			delete(s, "value")
			if rapid.Bool().Draw(rt, "null value") {
				s["value"] = nil
			}
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
	// Numbers come in their groups (a request and its limit, a minimum
	// and its maximum), each member present or not, so that orderings and
	// defaults decide as often as ranges do.
	for range rapid.IntRange(0, 2).Draw(rt, "number groups") {
		for _, k := range pick(rt, "number group", specGroups...) {
			if rarely(rt, 4, "leave out "+k) {
				continue
			}
			switch {
			case contains(specScales, k):
				spec[k] = float64(chooseSpec(m, rt, k, []int{0, 1, 2, 3, 5}, -1))
			case contains(specCPUs, k):
				spec[k] = chooseSpec(m, rt, k, []float64{0.25, 0.5, 1, 1.5, 2, 4}, 0, -1)
			case contains(specMemory, k):
				spec[k] = float64(chooseSpec(m, rt, k, []int{128, 256, 512, 1024, 2048}, 0, -5))
			default:
				spec[k] = float64(pick(rt, k, 1, 10, 100))
			}
		}
	}
	if rarely(rt, 3, "volumes") {
		var vols []any
		names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"data", "cache", "v-1"}), 1, 2, rapid.ID).Draw(rt, "volume names")
		if m.oops(rt, "spec", 2) {
			names = append(names, pick(rt, "bad volume name", "Data", "", names[0]))
		}
		for _, name := range names {
			vols = append(vols, pick(rt, "volume source", map[string]any{"name": name, "emptyDir": map[string]any{}},
				map[string]any{"name": name, "configMap": map[string]any{"name": "cm"}}))
		}
		spec["volumes"] = vols
		if rapid.Bool().Draw(rt, "mounts") {
			spec["volume_mounts"] = []any{map[string]any{"name": chooseSpec(m, rt, "mount name", names, "ghost"),
				"mountPath": chooseSpec(m, rt, "mount path", []string{"/data", "/var/cache"}, "")}}
		}
	}
	for _, k := range []string{"init_containers", "sidecars"} {
		if !rarely(rt, 4, k) {
			continue
		}
		c := map[string]any{"name": chooseSpec(m, rt, k+" name", []string{k[:4] + "-1", k[:4] + "-2"}, "Side_1"),
			"image": chooseSpec(m, rt, "image", []string{"busybox:1", "ghcr.io/acme/proxy@sha256:" + strings.Repeat("ab", 32)}, "")}
		if rarely(rt, 3, "pull policy") {
			c["imagePullPolicy"] = chooseSpec(m, rt, "pull policy", []string{"Always", "IfNotPresent", "Never"}, "Sometimes")
		}
		if rarely(rt, 3, "env") {
			e := map[string]any{"name": chooseSpec(m, rt, "env name", []string{"FOO", "_BAR1"}, "1X", "A-B"), "value": pick(rt, "env value", "1", "")}
			if rapid.Bool().Draw(rt, "valueFrom") {
				e["valueFrom"] = map[string]any{"secretKeyRef": map[string]any{"name": "s", "key": "k"}}
				if !m.oops(rt, "spec", 2) {
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

// specGroups are the numbers of a resource_spec by group.
var specGroups = [][]string{{"min_scale", "max_scale"}, {"queue_min_scale", "queue_max_scale"}, {"cpu", "cpu_limit"},
	{"memory_mb", "memory_limit_mb"}, {"queue_cpu", "queue_cpu_limit"}, {"queue_memory_mb", "queue_memory_limit_mb"},
	{"db_cpu", "db_cpu_limit"}, {"db_memory_mb", "db_memory_limit_mb"}, {"redis_memory_mb", "db_storage_gi", "db_max_connections"}}

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
		return pick(rt, "source", sources...), true
	case "display_name":
		s, _ := m.value(rt, "display name", pick(rt, "bad display name", "", strings.Repeat("é", 257)),
			"My agent", "Agent ✓ prod", strings.Repeat("é", 256), "x")
		return s, displayNameOK(s)
	case "source_config.integration_id":
		other := m.integ[otherTenant(tenant)]
		v := choose(m, rt, "integration", []string{m.integ[tenant]}, m.integ[tenant], m.integ[tenant], other, unknownID, "not-a-uuid")
		return v, v == m.integ[tenant]
	case "source_config.repo_url":
		s := m.genRepoURL(rt)
		return s, s != ""
	case "source_config.deployment_type":
		return m.value(rt, "deployment type", pick(rt, "bad type", "staging", "PROD", "zero"), "dev_free", "dev", "prod", "dev_zero", "dev_free_zero")
	case "source_config.build_on_push", "source_config.auto_rollback":
		return rapid.Bool().Draw(rt, key), true
	case "source_config.custom_url":
		return m.value(rt, "custom url", pick(rt, "bad custom url", "", "javascript:alert(1)", "ftp://a.example/x", "https://", "//a.example"),
			"https://a.example", "http://agent.internal:8080/x")
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
	case "source_config.preview":
		p := map[string]any{"mode": "all", "label": nil, "idle_ttl_minutes": nil, "max_concurrent": nil}
		if rapid.Bool().Draw(rt, "preview by label") {
			p["mode"], p["label"] = "label", pick(rt, "preview label", "preview", "deploy: preview")
		}
		if rapid.Bool().Draw(rt, "preview ttl") {
			p["idle_ttl_minutes"] = pick(rt, "preview ttl minutes", 1.0, 60.0, 525600.0)
		}
		if rapid.Bool().Draw(rt, "preview max") {
			p["max_concurrent"] = pick(rt, "preview max concurrent", 1.0, 10.0, 1000.0)
		}
		if m.oops(rt, "value", 3) {
			switch pick(rt, "bad preview", 0, 1, 2, 3, 4) {
			case 0:
				p["mode"] = pick(rt, "bad preview mode", nil, any("some"), any("ALL"))
			case 1:
				p["mode"], p["label"] = "label", nil
			case 2:
				p["mode"], p["label"] = "all", "preview"
			case 3:
				p["idle_ttl_minutes"] = 0.0
			case 4:
				p["max_concurrent"] = 1001.0
			}
		}
		return p, previewOK(p)
	case "source_config.install_command", "source_config.build_command":
		return m.value(rt, key, "", "npm ci", "pnpm i --frozen-lockfile", "yarn && yarn build")
	case "source_revision_config.repo_ref":
		s := m.genRef(rt)
		return s, s != ""
	case "source_revision_config.graph_config_path":
		return m.value(rt, "graph path", "", "langgraph.json", "apps/agent/langgraph.json", "./graphs/g.json")
	case "source_revision_config.image_uri":
		return m.value(rt, "image", "", "r/a:1", "ghcr.io/acme/agent:v2", "registry.example:5000/x/y@sha256:"+strings.Repeat("0f", 32))
	case "source_revision_config.source_tarball_path":
		return m.value(rt, "tarball", "", "uploads/"+tenant+"/a.tar.gz", "uploads/x/b.tar.gz")
	case "source_revision_config.repo_commit_sha":
		return pick(rt, "sha", "abc123", ""), true
	case "url":
		return pick(rt, "url", "http://127.0.0.1:9/d/x", ""), true
	case "secrets":
		s := m.genSecrets(rt)
		return s, secretsOK(s)
	case "secret_references":
		s := m.genRefs(rt)
		return s, refsOK(s)
	case "agent":
		a := map[string]any{"agent_id": choose(m, rt, "agent id", []string{"agent-1", "agent-2", "7a0e0000-0000-4000-8000-00000000000a"}, "", strings.Repeat("a", 257)),
			"environment": choose(m, rt, "agent environment", agentEnvironments, "qa", "Production")}
		if m.oops(rt, "value", 4) {
			delete(a, "environment")
		}
		return a, agentOK(a)
	case "is_preview":
		return rapid.Bool().Draw(rt, key), true
	case "pinned_revision_id":
		return unknownID, true // on a create: refused whatever it names (patch draws its own)
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

// genTrackedPackages draws tracked_packages for a PATCH or a
// create-revision: absent, some names (unicode, the longest), or one bad
// list (an empty name, one too long, too many names).
func (m *machine) genTrackedPackages(rt *rapid.T) (any, bool) {
	if rapid.Bool().Draw(rt, "no tracked packages") {
		return nil, true
	}
	if m.oops(rt, "value", 2) {
		bad := pick(rt, "bad tracked packages", 0, 1, 2)
		switch bad {
		case 0:
			return []any{"langgraph", ""}, false
		case 1:
			return []any{strings.Repeat("p", 215)}, false
		}
		out := []any{}
		for i := range 101 {
			out = append(out, fmt.Sprint("p", i))
		}
		return out, false
	}
	names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"langgraph", "langchain-core", "é-pkg", strings.Repeat("p", 214), "@scope/js"}),
		0, 3, rapid.ID).Draw(rt, "tracked packages")
	out := []any{}
	for _, n := range names {
		out = append(out, n)
	}
	return out, true
}

// genRevisionSource draws revision_source for a PATCH of a deployment of
// source own: absent, own, or (a fault) another source.
func (m *machine) genRevisionSource(rt *rapid.T, own string) (any, bool) {
	if m.oops(rt, "value", 3) {
		others := slices.DeleteFunc(slices.Clone(append(sources, "gitlab")), func(s string) bool { return s == own })
		return pick(rt, "bad revision source", others...), false
	}
	if rapid.Bool().Draw(rt, "revision source") {
		return own, true
	}
	return nil, true
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
	if m.oops(rt, "tags", 1) {
		return append(out, "tag-1"), false
	}
	return out, true
}

// sha draws a fresh commit sha: every push names another commit.
func (m *machine) sha() string {
	m.pushes++
	return fmt.Sprintf("%040x", m.pushes)
}
