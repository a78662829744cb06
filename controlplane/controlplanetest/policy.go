package controlplanetest

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// The model's own statement of the deployment rules: wire contract
// section 6 and the seed's field tables, written out again here rather than
// read from controlplane.FieldRules (the table under test), so that a wrong
// rule in the control plane shows as a difference instead of being copied
// into the prediction. TestModelTableAgrees compares the two tables.

// createPolicy says what a create does with a field, for one source.
type createPolicy int

const (
	cNA       createPolicy = iota // does not apply to the source: a value is 422
	cRequired                     // null is 422
	cOptional                     // may be null; some have defaults
	cReadOnly                     // the service assigns it: a value is 422
	cIgnored                      // a read-only response field: ignored in requests
)

// patchPolicy says what a PATCH does with a non-null field, for one source.
type patchPolicy int

const (
	pNA        patchPolicy = iota // does not apply to the source: a value is 422
	pImmutable                    // a different value is 422; an equal one is a no-op
	pInPlace                      // replaces the stored value, no revision
	pRevision                     // replaces the stored value and makes a revision, even when equal
	pReadOnly                     // the service owns it: a value is 422
	pIgnored                      // a read-only response field: ignored in requests
)

// Sources, in column order (section 10 adds the two of langgraph deploy).
const (
	github         = "github"
	externalDocker = "external_docker"
	internalSource = "internal_source"
	internalDocker = "internal_docker"
)

var sources = []string{github, externalDocker, internalSource, internalDocker}

func srcIndex(source string) int { return max(0, slices.Index(sources, source)) }

// revisionFrom is, for the sources of langgraph deploy, the field a
// revision comes from (section 10): until a deployment has it, it has no
// revision. The other sources' creates require what a revision needs.
var revisionFrom = map[string]string{
	internalSource: "source_revision_config.source_tarball_path",
	internalDocker: "source_revision_config.image_uri",
}

// hasRevisionFrom says whether a deployment (its expected JSON) has what
// a revision of its source comes from.
func hasRevisionFrom(exp map[string]any) bool {
	k, ok := revisionFrom[exp["source"].(string)]
	return !ok || getPath(exp, loc(k)) != nil
}

// fieldPolicy is one row: a request field (its JSON path below "body") and
// its policies for {github, external_docker, internal_source,
// internal_docker}.
type fieldPolicy struct {
	loc    []string
	create [4]createPolicy
	patch  [4]patchPolicy
}

type (
	cc = [4]createPolicy
	pp = [4]patchPolicy
)

func (f fieldPolicy) key() string { return strings.Join(f.loc, ".") }

func loc(s string) []string { return strings.Split(s, ".") }

// modelFields is the table. Columns: github, external_docker,
// internal_source, internal_docker.
var modelFields = []fieldPolicy{
	// Seed: name and source cannot be changed after creation; section 6:
	// in a PATCH they are 422 immutable_field when they differ.
	{loc("name"), cc{cRequired, cRequired, cRequired, cRequired}, pp{pImmutable, pImmutable, pImmutable, pImmutable}},
	{loc("source"), cc{cRequired, cRequired, cRequired, cRequired}, pp{pImmutable, pImmutable, pImmutable, pImmutable}},
	// Section 9: display_name is optional on create and changes in place
	// by PATCH, for every source. Null is "no change" and "" is invalid
	// (1..256 characters), so once set it cannot be cleared.
	{loc("display_name"), cc{cOptional, cOptional, cOptional, cOptional}, pp{pInPlace, pInPlace, pInPlace, pInPlace}},
	// Section 6: github create needs integration_id and repo_url; the seed:
	// not changeable by PATCH, only for github (section 10: not
	// applicable to langgraph deploy's sources).
	{loc("source_config.integration_id"), cc{cRequired, cNA, cNA, cNA}, pp{pImmutable, pNA, pNA, pNA}},
	{loc("source_config.repo_url"), cc{cRequired, cNA, cNA, cNA}, pp{pImmutable, pNA, pNA, pNA}},
	// Defaults to prod for github, dev for langgraph deploy's sources
	// (section 10); not changeable by PATCH; not for external_docker.
	{loc("source_config.deployment_type"), cc{cOptional, cNA, cOptional, cOptional}, pp{pImmutable, pNA, pImmutable, pImmutable}},
	// Defaults to false; changes in place; only for github.
	{loc("source_config.build_on_push"), cc{cOptional, cNA, cNA, cNA}, pp{pInPlace, pNA, pNA, pNA}},
	// Settable only for external_docker (in place); assigned and read-only
	// for github; not applicable to langgraph deploy's sources (section
	// 10).
	{loc("source_config.custom_url"), cc{cReadOnly, cOptional, cNA, cNA}, pp{pReadOnly, pInPlace, pNA, pNA}},
	// Not for github; a non-null PATCH value makes a revision and replaces
	// the whole object (section 10: as for external_docker).
	{loc("source_config.resource_spec"), cc{cNA, cOptional, cOptional, cOptional}, pp{pNA, pRevision, pRevision, pRevision}},
	// Only for external_docker; not changeable by PATCH.
	{loc("source_config.listener_id"), cc{cNA, cOptional, cNA, cNA}, pp{pNA, pImmutable, pNA, pNA}},
	{loc("source_config.listener_config"), cc{cNA, cOptional, cNA, cNA}, pp{pNA, pImmutable, pNA, pNA}},
	// JS builds: github and internal_source (the builds); change in place.
	// Section 11: auto_rollback is optional, for every source, in place.
	{loc("source_config.auto_rollback"), cc{cOptional, cOptional, cOptional, cOptional}, pp{pInPlace, pInPlace, pInPlace, pInPlace}},
	{loc("source_config.install_command"), cc{cOptional, cNA, cOptional, cNA}, pp{pInPlace, pNA, pInPlace, pNA}},
	{loc("source_config.build_command"), cc{cOptional, cNA, cOptional, cNA}, pp{pInPlace, pNA, pInPlace, pNA}},
	// Section 11: preview deployments of pull requests, github only;
	// changes in place.
	{loc("source_config.preview"), cc{cOptional, cNA, cNA, cNA}, pp{pInPlace, pNA, pNA, pNA}},
	// Any non-null source_revision_config field makes a revision.
	{loc("source_revision_config.repo_ref"), cc{cRequired, cNA, cNA, cNA}, pp{pRevision, pNA, pNA, pNA}},
	// internal_source: optional, langgraph.json by default.
	{loc("source_revision_config.graph_config_path"), cc{cRequired, cNA, cOptional, cNA}, pp{pRevision, pNA, pRevision, pNA}},
	// internal_docker: what its revisions come from, optional on create.
	{loc("source_revision_config.image_uri"), cc{cNA, cRequired, cNA, cOptional}, pp{pNA, pRevision, pNA, pRevision}},
	// internal_source: what its revisions come from.
	{loc("source_revision_config.source_tarball_path"), cc{cNA, cNA, cOptional, cNA}, pp{pNA, pNA, pRevision, pNA}},
	// Read-only response field: ignored in requests (section 1).
	{loc("source_revision_config.repo_commit_sha"), cc{cIgnored, cIgnored, cIgnored, cIgnored}, pp{pIgnored, pIgnored, pIgnored, pIgnored}},
	// Read-only response field set by the deployer: ignored in requests
	// (sections 1 and 9).
	{loc("url"), cc{cIgnored, cIgnored, cIgnored, cIgnored}, pp{pIgnored, pIgnored, pIgnored, pIgnored}},
	// Optional on create; a non-empty list makes a revision ([] is "no
	// change").
	{loc("secrets"), cc{cOptional, cOptional, cOptional, cOptional}, pp{pRevision, pRevision, pRevision, pRevision}},
	// Section 11: secret_references behave as secrets (a non-empty list
	// makes a revision, [] is "no change").
	{loc("secret_references"), cc{cOptional, cOptional, cOptional, cOptional}, pp{pRevision, pRevision, pRevision, pRevision}},
	// Section 11: agent is optional, for every source; a PATCH changes it
	// in place. At most one deployment per agent and environment (409).
	{loc("agent"), cc{cOptional, cOptional, cOptional, cOptional}, pp{pInPlace, pInPlace, pInPlace, pInPlace}},
	// Section 11: is_preview is read-only (the service makes previews).
	{loc("is_preview"), cc{cIgnored, cIgnored, cIgnored, cIgnored}, pp{pIgnored, pIgnored, pIgnored, pIgnored}},
	// Section 11: pinned_revision_id is set by a PATCH, in place, to the
	// active revision (400 otherwise, and while a revision is
	// DEPLOYING); a create has no revision to pin (422 read_only_field).
	{loc("pinned_revision_id"), cc{cReadOnly, cReadOnly, cReadOnly, cReadOnly}, pp{pInPlace, pInPlace, pInPlace, pInPlace}},
}

// refsOK checks a secret_references list (section 11): C identifier
// names, unique; secret_name a DNS subdomain; secret_key a Secret's key.
func refsOK(v any) bool {
	seen := map[string]bool{}
	for _, r := range asSlice(v) {
		m := r.(map[string]any)
		name, _ := m["name"].(string)
		sn, _ := m["secret_name"].(string)
		sk, _ := m["secret_key"].(string)
		if !envNameOK(name) || seen[name] || !dnsSubOK(sn) || !secretKeyOK(sk) {
			return false
		}
		seen[name] = true
	}
	return true
}

// namesApart says that no name is both a secret's and a secret
// reference's.
func namesApart(secrets, refs any) bool {
	names := map[any]bool{}
	for _, s := range asSlice(secrets) {
		names[s.(map[string]any)["name"]] = true
	}
	for _, r := range asSlice(refs) {
		if names[r.(map[string]any)["name"]] {
			return false
		}
	}
	return true
}

func dnsSubOK(s string) bool {
	if s == "" || len(s) > 253 || strings.Trim(s, "-.") != s {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func secretKeyOK(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// agentEnvironments are the environments of an agent (section 11).
var agentEnvironments = []string{"development", "staging", "production"}

// agentOK checks an agent object: an agent_id of 1..256 bytes and one of
// the environments.
func agentOK(v any) bool {
	m, _ := v.(map[string]any)
	id, _ := m["agent_id"].(string)
	env, _ := m["environment"].(string)
	return id != "" && len(id) <= 256 && slices.Contains(agentEnvironments, env)
}

// previewOK checks a source_config.preview (section 11): mode "all" or
// "label"; a label (1..2048 bytes) with mode "label" and only then;
// idle_ttl_minutes 1..525600 and max_concurrent 1..1000 when given.
func previewOK(v any) bool {
	m, _ := v.(map[string]any)
	mode, _ := m["mode"].(string)
	if mode != "all" && mode != "label" {
		return false
	}
	label, hasLabel := m["label"].(string)
	if hasLabel != (mode == "label") || hasLabel && (label == "" || len(label) > 2048) {
		return false
	}
	inRange := func(k string, hi float64) bool {
		n, ok := m[k].(float64)
		return m[k] == nil || ok && n >= 1 && n <= hi
	}
	return inRange("idle_ttl_minutes", 525600) && inRange("max_concurrent", 1000)
}

// trackedPackagesOK: null, or at most 100 strings of 1..214 characters
// (section 10).
func trackedPackagesOK(v any) bool {
	l := asSlice(v)
	if len(l) > 100 {
		return false
	}
	for _, p := range l {
		n := utf8.RuneCountInString(p.(string))
		if n < 1 || n > 214 {
			return false
		}
	}
	return true
}

// displayNameOK: 1 to 256 characters (section 9), counted as characters,
// not bytes.
func displayNameOK(s string) bool { n := utf8.RuneCountInString(s); return n >= 1 && n <= 256 }

// isTag: a tag ref is the full ref path beginning refs/tags/ (seed,
// SourceRevisionConfig.repo_ref); anything else is a branch name.
func isTag(ref any) bool {
	s, ok := ref.(string)
	return ok && strings.HasPrefix(s, "refs/tags/")
}

func alnum(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' }

// nameOK: 1..63 characters of [A-Za-z0-9._-], starting with a letter or
// digit (section 6).
func nameOK(s string) bool {
	if len(s) < 1 || len(s) > 63 || !alnum(s[0]) {
		return false
	}
	for i := range len(s) {
		if b := s[i]; !alnum(b) && !strings.ContainsRune("._-", rune(b)) {
			return false
		}
	}
	return true
}

// dnsLabelOK: a Kubernetes name (RFC 1123 label), for volumes,
// containers and namespaces.
func dnsLabelOK(s string) bool {
	if len(s) < 1 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := range len(s) {
		if b := s[i]; !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-') {
			return false
		}
	}
	return true
}

// envNameOK: a C identifier, the name of an environment variable (EnvVar
// names, and secret names, which become environment variables).
func envNameOK(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := range len(s) {
		if b := s[i]; !alnum(b) && b != '_' {
			return false
		}
	}
	return true
}

// secretsOK checks a secrets list (decoded JSON): every secret has a name
// that is a unique environment variable name, and a value (a string, which
// may be empty); a missing or null value is a problem.
func secretsOK(v any) bool {
	list, _ := v.([]any)
	seen := map[string]bool{}
	namesOK, valuesOK := true, true
	for _, s := range list {
		m := s.(map[string]any)
		name, _ := m["name"].(string)
		if !envNameOK(name) || seen[name] {
			namesOK = false
		}
		seen[name] = true
		if _, ok := m["value"].(string); !ok {
			valuesOK = false
		}
	}
	return namesOK && valuesOK
}

// Resource spec numbers (section 6: scales >= 0, cpu and memory > 0,
// min_scale <= max_scale, limits >= requests), with the seed's defaults:
// a limit is 2x its request, queue_* take the main values.
var (
	specScales = []string{"min_scale", "max_scale", "queue_min_scale", "queue_max_scale"}
	specCPUs   = []string{"cpu", "cpu_limit", "queue_cpu", "queue_cpu_limit", "db_cpu", "db_cpu_limit"}
	specMemory = []string{"memory_mb", "memory_limit_mb", "queue_memory_mb", "queue_memory_limit_mb",
		"db_memory_mb", "db_memory_limit_mb", "redis_memory_mb"}
	specOther = []string{"db_storage_gi", "db_max_connections"} // drawn positive only: the contract gives no range
)

func num(m map[string]any, k string) (float64, bool) {
	f, ok := m[k].(float64)
	return f, ok
}

// zeroTypes are the deployment types that scale to zero (section 11).
var zeroTypes = []string{"dev_zero", "dev_free_zero"}

// zeroScaleOK is section 11's rule on min_scale: 0 only for a deployment
// type that scales to zero, on the sources that have a deployment_type
// (dtype is the deployment's, its default applied); external_docker
// keeps section 6's scales >= 0.
func zeroScaleOK(source string, dtype, spec any) bool {
	m, _ := spec.(map[string]any)
	if source == externalDocker || source == github || m == nil || m["min_scale"] != 0.0 {
		return true
	}
	t, _ := dtype.(string)
	return slices.Contains(zeroTypes, t)
}

// defaultType is a create's deployment_type when the body has none: prod
// for github, dev for langgraph deploy's sources (section 10).
func defaultType(source string) string {
	if source == github {
		return "prod"
	}
	return "dev"
}

// specOK checks a resource_spec (decoded JSON).
func specOK(m map[string]any) bool {
	for _, k := range specScales {
		if v, ok := num(m, k); ok && v < 0 {
			return false
		}
	}
	for _, k := range slices.Concat(specCPUs, specMemory) {
		if v, ok := num(m, k); ok && v <= 0 {
			return false
		}
	}
	// value or default
	get := func(k string, def func() (float64, bool)) (float64, bool) {
		if v, ok := num(m, k); ok {
			return v, true
		}
		return def()
	}
	none := func() (float64, bool) { return 0, false }
	from := func(k string) func() (float64, bool) { return func() (float64, bool) { return num(m, k) } }
	twice := func(f func() (float64, bool)) func() (float64, bool) {
		return func() (float64, bool) { v, ok := f(); return 2 * v, ok }
	}
	minS, _ := get("min_scale", none)
	_, hasMin := num(m, "min_scale")
	maxS, hasMax := num(m, "max_scale")
	if hasMin && hasMax && minS > maxS {
		return false
	}
	qMin, hasQMin := get("queue_min_scale", from("min_scale"))
	qMax, hasQMax := get("queue_max_scale", from("max_scale"))
	if hasQMin && hasQMax && qMin > qMax {
		return false
	}
	pairs := [][2]func() (float64, bool){}
	for _, p := range [][3]string{{"cpu", "cpu_limit", ""}, {"memory_mb", "memory_limit_mb", ""},
		{"db_cpu", "db_cpu_limit", ""}, {"db_memory_mb", "db_memory_limit_mb", ""},
		{"queue_cpu", "queue_cpu_limit", "cpu"}, {"queue_memory_mb", "queue_memory_limit_mb", "memory_mb"}} {
		req := from(p[0])
		if p[2] != "" {
			req = func() (float64, bool) { return get(p[0], from(p[2])) }
		}
		limit := func() (float64, bool) { return get(p[1], twice(req)) }
		pairs = append(pairs, [2]func() (float64, bool){req, limit})
	}
	for _, p := range pairs {
		r, okR := p[0]()
		l, okL := p[1]()
		if okR && okL && r > l {
			return false
		}
	}
	// Kubernetes sub-objects: volumes named by unique DNS labels, mounts
	// naming one of them with a mountPath, containers named by DNS labels
	// (unique in the pod) with an image, an imagePullPolicy of the enum,
	// env names that are C identifiers, value and valueFrom exclusive.
	vols := map[string]bool{}
	for _, v := range list(m["volumes"]) {
		name, _ := v["name"].(string)
		if !dnsLabelOK(name) || vols[name] {
			return false
		}
		vols[name] = true
	}
	mountsOK := func(ms []map[string]any) bool {
		for _, mt := range ms {
			name, _ := mt["name"].(string)
			path, _ := mt["mountPath"].(string)
			if !vols[name] || path == "" {
				return false
			}
		}
		return true
	}
	if !mountsOK(list(m["volume_mounts"])) {
		return false
	}
	names := map[string]bool{}
	for _, c := range slices.Concat(list(m["init_containers"]), list(m["sidecars"])) {
		name, _ := c["name"].(string)
		image, _ := c["image"].(string)
		if !dnsLabelOK(name) || names[name] || image == "" {
			return false
		}
		names[name] = true
		if p, ok := c["imagePullPolicy"]; ok && !slices.Contains([]any{"Always", "Never", "IfNotPresent"}, p) {
			return false
		}
		for _, e := range list(c["env"]) {
			n, _ := e["name"].(string)
			val, _ := e["value"].(string)
			if !envNameOK(n) || e["valueFrom"] != nil && val != "" {
				return false
			}
		}
		if !mountsOK(list(c["volumeMounts"])) {
			return false
		}
	}
	return true
}

// list reads a JSON array of objects.
func list(v any) []map[string]any {
	var out []map[string]any
	for _, x := range asSlice(v) {
		out = append(out, x.(map[string]any))
	}
	return out
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// normRepo reduces a repository URL as PushEvent documents: case, scheme,
// user, a trailing ".git" or "/" do not matter, and git@host:owner/repo is
// https://host/owner/repo.
func normRepo(s string) string {
	s = strings.ToLower(s)
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	} else if h, p, ok := strings.Cut(s, ":"); ok {
		s = h + "/" + p
	}
	if _, after, ok := strings.Cut(s, "@"); ok {
		s = after
	}
	s = strings.TrimSuffix(strings.TrimSuffix(s, "/"), ".git")
	return s
}
