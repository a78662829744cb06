package controlplane

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/deployplane/deployplane/apierr"
)

// maxNumber bounds every numeric field of a ResourceSpec, so that the
// documented defaults (2x a request) cannot overflow: it is the lte of the
// numbers' shape tags in types.go (TestShapeNumberTags checks they agree).
const maxNumber = 1_000_000_000

// checker collects problems. Its methods check one value each and report
// whether it was acceptable.
type checker struct {
	lim Limits
	sh  *shapes // nil for checks that use no shape tags
	ps  []apierr.Problem
}

func at(base []any, more ...any) []any {
	out := make([]any, 0, len(base)+len(more))
	return append(append(out, base...), more...)
}

func (c *checker) add(loc []any, typ, msg string) {
	c.ps = append(c.ps, apierr.Problem{Loc: loc, Type: typ, Msg: msg})
}

// str checks a required-non-empty string of at most max bytes.
func (c *checker) str(loc []any, s string, max int) bool {
	if s == "" {
		c.add(loc, apierr.TypeStringTooShort, "String should have at least 1 character")
		return false
	}
	if len(s) > max {
		c.add(loc, apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d bytes", max))
		return false
	}
	return true
}

// items checks a list length.
func (c *checker) items(loc []any, n, max int) bool {
	if n > max {
		c.add(loc, apierr.TypeTooLong, fmt.Sprintf("List should have at most %d items", max))
		return false
	}
	return true
}

func (c *checker) uuid(loc []any, s string) bool {
	if _, err := uuid.Parse(s); err != nil || len(s) != 36 {
		c.add(loc, apierr.TypeUUIDParsing, apierr.MsgInvalidUUID)
		return false
	}
	return true
}

func (c *checker) pattern(loc []any, ok bool, pat string) bool {
	if !ok {
		c.add(loc, apierr.TypeStringPatternMismatch, "String should match pattern '"+pat+"'")
	}
	return ok
}

func (c *checker) object(loc []any, m map[string]any) {
	if m == nil {
		return
	}
	b, err := json.Marshal(m)
	if err != nil {
		c.add(loc, apierr.TypeValueError, "Value should be a JSON object")
		return
	}
	if len(b) > c.lim.MaxObjectBytes {
		c.add(loc, apierr.TypeTooLong, fmt.Sprintf("Object should encode to at most %d bytes", c.lim.MaxObjectBytes))
	}
}

// canonicalUUID lowercases a UUID string that parses, so that ids compare
// equal whatever case the client used; other strings are left to the check.
func canonicalUUID(p *string) *string {
	if p == nil {
		return nil
	}
	if u, err := uuid.Parse(*p); err == nil && len(*p) == 36 {
		s := u.String()
		return &s
	}
	return p
}

// Patterns, named in messages.
const (
	namePattern      = `^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`
	dnsLabelPattern  = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ (at most 63 characters)`
	dnsSubPattern    = `^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ (at most 253 characters)`
	cIdentPattern    = `^[A-Za-z_][A-Za-z0-9_]*$`
	qualNamePattern  = `([DNS subdomain]/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])? (name at most 63 characters)`
	labelValPattern  = `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])? (at most 63 characters)`
	secretKeyPattern = `^[-._a-zA-Z0-9]+$ (at most 253 characters)`
)

// validSecretKey reports whether s is a key of a Kubernetes Secret.
func validSecretKey(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !isAlnum(b) && b != '-' && b != '.' && b != '_' {
			return false
		}
	}
	return true
}

// urlMessage is the message of a URL that urlProblem refuses.
const urlMessage = "Input should be an absolute URL with scheme 'http' or 'https' and a host"

// urlProblem is the problem type of s as a URL a person or a client is
// sent to (custom_url): "" for an absolute http or https URL with a host
// and no credentials, TypeURLScheme for another scheme (javascript:,
// data:, file:...), TypeURLParsing for anything else.
func urlProblem(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs():
		return apierr.TypeURLParsing
	case u.Scheme != "http" && u.Scheme != "https":
		return apierr.TypeURLScheme
	case u.Host == "" || u.User != nil || u.Opaque != "":
		return apierr.TypeURLParsing
	}
	return ""
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

func isLowerAlnum(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }

// validName reports whether s is a valid deployment name.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if b := s[i]; !isAlnum(b) && b != '.' && b != '_' && b != '-' {
			return false
		}
	}
	return true
}

// validDNSLabel reports whether s is an RFC 1123 label (Kubernetes names of
// containers, volumes, namespaces).
func validDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || !isLowerAlnum(s[0]) || !isLowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !isLowerAlnum(b) && b != '-' {
			return false
		}
	}
	return true
}

// validDNSSubdomain reports whether s is an RFC 1123 subdomain.
func validDNSSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 || !isLowerAlnum(s[0]) || !isLowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !isLowerAlnum(b) && b != '-' && b != '.' {
			return false
		}
	}
	return true
}

func validCIdent(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !isAlnum(b) && b != '_' {
			return false
		}
	}
	return true
}

// validLabelValue: empty, or at most 63 characters of [-A-Za-z0-9_.]
// starting and ending alphanumeric.
func validLabelValue(s string) bool {
	if s == "" {
		return true
	}
	if len(s) > 63 || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !isAlnum(b) && b != '-' && b != '_' && b != '.' {
			return false
		}
	}
	return true
}

// validQualifiedName is a Kubernetes label or annotation key.
func validQualifiedName(s string) bool {
	prefix, name, found := strings.Cut(s, "/")
	if !found {
		name, prefix = prefix, ""
	} else if !validDNSSubdomain(prefix) {
		return false
	}
	return name != "" && validLabelValue(name)
}

// checkDeploymentValues checks the value of every non-null field of d (a
// request seen as a Deployment), independently of the source rules: the
// shape tags of its types, then the plain checks of a resource_spec. The
// problems come in the order of the rules table's rows (which is the
// order of the fields), a resource_spec's own fields first among its
// problems, ranked as shapes.specRank says.
func (c *checker) checkDeploymentValues(d *Deployment) {
	ps := c.sh.problems([]any{"body"}, d)
	specRow := ruleIndex(locResourceSpec)
	isNumber := func(p apierr.Problem) bool { return ruleOfLoc(p.Loc) == specRow && c.sh.specRank[specKey(p.Loc)] < 3 }
	slices.SortStableFunc(ps, func(a, b apierr.Problem) int {
		if ra, rb := ruleOfLoc(a.Loc), ruleOfLoc(b.Loc); ra != rb || ra != specRow {
			return ra - rb
		}
		ka, kb := specKey(a.Loc), specKey(b.Loc)
		if ra, rb := c.sh.specRank[ka], c.sh.specRank[kb]; ra != rb {
			return ra - rb
		}
		if c.sh.specRank[ka] == 3 {
			return 0 // not a number: the order of the fields
		}
		return strings.Compare(ka, kb)
	})
	i := 0
	for i < len(ps) && ruleOfLoc(ps[i].Loc) < specRow {
		i++
	}
	n := i
	for n < len(ps) && isNumber(ps[n]) {
		n++
	}
	r := n
	for r < len(ps) && ruleOfLoc(ps[r].Loc) == specRow {
		r++
	}
	c.ps = append(c.ps, ps[:n]...)
	if spec := d.SourceConfig.ResourceSpec; spec != nil {
		c.checkResourceSpec(bodyLoc(locResourceSpec), spec, n > i, ps[n:r])
	}
	c.ps = append(c.ps, ps[r:]...)
}

// item checks one item of a list, or one object, at loc: the shape tags of
// v (a pointer to its struct), then plain, which gets the index in c.ps of
// the item's first problem. The problems of both come in the order of the
// item's fields.
func (c *checker) item(loc []any, v any, plain func(start int)) {
	start := len(c.ps)
	c.ps = append(c.ps, c.sh.problems(loc, v)...)
	if plain != nil {
		plain(start)
	}
	c.sortByField(start, loc, v)
}

// sortByField sorts the problems from start on (all at or below loc) in the
// order of the fields of v's struct, stably.
func (c *checker) sortByField(start int, loc []any, v any) {
	order, depth := c.sh.fieldOrder[reflect.TypeOf(v).Elem()], len(loc)
	rank := func(p apierr.Problem) int {
		if len(p.Loc) > depth {
			if s, ok := p.Loc[depth].(string); ok {
				return order[s]
			}
		}
		return -1
	}
	slices.SortStableFunc(c.ps[start:], func(a, b apierr.Problem) int { return rank(a) - rank(b) })
}

// clean reports whether no problem from start on is at loc.
func (c *checker) clean(start int, loc []any) bool {
	return !slices.ContainsFunc(c.ps[start:], func(p apierr.Problem) bool { return slices.Equal(p.Loc, loc) })
}

// specKey is the resource_spec field a problem's loc names, or "".
func specKey(loc []any) string {
	if len(loc) > 3 {
		s, _ := loc[3].(string)
		return s
	}
	return ""
}

// secrets checks a request's secrets and returns them as a deployment
// stores them. The cap comes first: a list over MaxSecrets is one problem
// and nothing in it is looked at (the result is then nil). Names are
// required C identifiers, unique (one map, linear); a value is required
// (missing or null is 422 missing; "" is allowed) and at most
// MaxSecretValueBytes.
func (c *checker) secrets(loc []any, in []SecretInput) []Secret {
	if in == nil || !c.items(loc, len(in), c.lim.MaxSecrets) {
		return nil
	}
	out := make([]Secret, len(in))
	seen := make(map[string]bool, len(in))
	for i := range in {
		s, il := &in[i], at(loc, i)
		c.item(il, s, func(start int) {
			if nl := at(il, "name"); c.clean(start, nl) {
				if seen[s.Name] {
					c.add(nl, apierr.TypeDuplicate, "Secret names should be unique")
				}
				seen[s.Name] = true
			}
		})
		out[i].Name = s.Name
		if s.Value != nil && len(*s.Value) <= c.lim.MaxSecretValueBytes {
			out[i].Value = *s.Value
		}
	}
	return out
}

// secretReferences checks a request's secret_references (nil for none):
// the cap of secrets, each item's shape, names unique among themselves
// and not a name of secrets (the request's, already checked).
func (c *checker) secretReferences(loc []any, refs []SecretReference, secrets []Secret) {
	if refs == nil || !c.items(loc, len(refs), c.lim.MaxSecrets) {
		return
	}
	seen := make(map[string]bool, len(refs))
	for i := range refs {
		r, il := &refs[i], at(loc, i)
		c.item(il, r, func(start int) {
			if nl := at(il, "name"); c.clean(start, nl) {
				switch {
				case seen[r.Name]:
					c.add(nl, apierr.TypeDuplicate, "Secret reference names should be unique")
				case slices.ContainsFunc(secrets, func(s Secret) bool { return s.Name == r.Name }):
					c.add(nl, apierr.TypeDuplicate, "A secret of this name is in secrets")
				}
				seen[r.Name] = true
			}
		})
	}
}

// tagValueIDs checks the create extension tag_value_ids and returns them
// canonical (lowercase), sorted and without duplicates. The cap comes
// first: a list over MaxTagValueIDs is one problem and nothing in it is
// looked at (the result is then nil).
func (c *checker) tagValueIDs(loc []any, ids []string) []string {
	if ids == nil || !c.items(loc, len(ids), c.lim.MaxTagValueIDs) {
		return nil
	}
	out := make([]string, 0, len(ids))
	for i, id := range ids {
		if c.uuid(at(loc, i), id) {
			id = *canonicalUUID(&id)
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// resourceNumbers lists the numeric fields of a ResourceSpec with their
// JSON names, for the range rules.
func resourceNumbers(r *ResourceSpec) (scales, positiveInts map[string]*int64, cpus map[string]*float64) {
	scales = map[string]*int64{
		"min_scale": r.MinScale, "max_scale": r.MaxScale,
		"queue_min_scale": r.QueueMinScale, "queue_max_scale": r.QueueMaxScale,
		"orchestrator_min_scale": r.OrchestratorMinScale, "orchestrator_max_scale": r.OrchestratorMaxScale,
	}
	positiveInts = map[string]*int64{
		"memory_mb": r.MemoryMB, "memory_limit_mb": r.MemoryLimitMB,
		"queue_memory_mb": r.QueueMemoryMB, "queue_memory_limit_mb": r.QueueMemoryLimitMB,
		"orchestrator_memory_mb": r.OrchestratorMemoryMB, "orchestrator_memory_limit_mb": r.OrchestratorMemoryLimitMB,
		"executor_memory_mb": r.ExecutorMemoryMB, "executor_memory_limit_mb": r.ExecutorMemoryLimitMB,
		"redis_memory_mb": r.RedisMemoryMB,
		"db_memory_mb":    r.DBMemoryMB, "db_memory_limit_mb": r.DBMemoryLimitMB,
		"db_storage_gi": r.DBStorageGi, "db_max_connections": r.DBMaxConnections,
	}
	cpus = map[string]*float64{
		"cpu": r.CPU, "cpu_limit": r.CPULimit,
		"queue_cpu": r.QueueCPU, "queue_cpu_limit": r.QueueCPULimit,
		"orchestrator_cpu": r.OrchestratorCPU, "orchestrator_cpu_limit": r.OrchestratorCPULimit,
		"executor_cpu": r.ExecutorCPU, "executor_cpu_limit": r.ExecutorCPULimit,
		"db_cpu": r.DBCPU, "db_cpu_limit": r.DBCPULimit,
	}
	return scales, positiveInts, cpus
}

// Ordered pairs checked on the spec with defaults applied: (low, high)
// where low <= high must hold.
var (
	scalePairs = [][2]string{{"min_scale", "max_scale"}, {"queue_min_scale", "queue_max_scale"}, {"orchestrator_min_scale", "orchestrator_max_scale"}}
	intLimits  = [][2]string{{"memory_mb", "memory_limit_mb"}, {"queue_memory_mb", "queue_memory_limit_mb"},
		{"orchestrator_memory_mb", "orchestrator_memory_limit_mb"}, {"executor_memory_mb", "executor_memory_limit_mb"},
		{"db_memory_mb", "db_memory_limit_mb"}}
	cpuLimits = [][2]string{{"cpu", "cpu_limit"}, {"queue_cpu", "queue_cpu_limit"}, {"orchestrator_cpu", "orchestrator_cpu_limit"},
		{"executor_cpu", "executor_cpu_limit"}, {"db_cpu", "db_cpu_limit"}}
)

// checkResourceSpec is the plain part of a resource_spec's checks (the
// numbers' ranges and service_account_name are shape tags). numbers says
// that a number is out of range: the orderings are then not looked at.
func (c *checker) checkResourceSpec(loc []any, r *ResourceSpec, numbers bool, shapes []apierr.Problem) {
	scales, ints, cpus := resourceNumbers(r)
	if !numbers {
		// Orderings, on the values the deployer will use, for pairs the
		// client gave at least one side of (a pair that is all defaults
		// only repeats another pair's problem).
		d := r.WithDefaults()
		dScales, dInts, dCPUs := resourceNumbers(&d)
		for _, p := range scalePairs {
			given := scales[p[0]] != nil || scales[p[1]] != nil
			if lo, hi := dScales[p[0]], dScales[p[1]]; given && lo != nil && hi != nil && *lo > *hi {
				if scales[p[0]] != nil {
					c.add(at(loc, p[0]), apierr.TypeLessThanEqual, "Input should be less than or equal to "+p[1])
				} else {
					c.add(at(loc, p[1]), apierr.TypeGreaterThanEqual, "Input should be greater than or equal to "+p[0])
				}
			}
		}
		for _, p := range intLimits {
			given := ints[p[0]] != nil || ints[p[1]] != nil
			if lo, hi := dInts[p[0]], dInts[p[1]]; given && lo != nil && hi != nil && *lo > *hi {
				c.limitProblem(loc, p, ints[p[1]] != nil)
			}
		}
		for _, p := range cpuLimits {
			given := cpus[p[0]] != nil || cpus[p[1]] != nil
			if lo, hi := dCPUs[p[0]], dCPUs[p[1]]; given && lo != nil && hi != nil && *lo > *hi {
				c.limitProblem(loc, p, cpus[p[1]] != nil)
			}
		}
	}

	start := len(c.ps)
	c.ps = append(c.ps, shapes...)
	c.checkStringMap(at(loc, "labels"), r.Labels, true)
	c.checkStringMap(at(loc, "annotations"), r.Annotations, false)
	if c.items(at(loc, "image_pull_secrets"), len(r.ImagePullSecrets), c.lim.MaxItems) {
		for i := range r.ImagePullSecrets {
			c.item(at(loc, "image_pull_secrets", i), &r.ImagePullSecrets[i], nil)
		}
	}
	volumes := map[string]bool{}
	if c.items(at(loc, "volumes"), len(r.Volumes), c.lim.MaxItems) {
		for i := range r.Volumes {
			v, vl := &r.Volumes[i], at(loc, "volumes", i)
			c.item(vl, v, func(start int) {
				c.unique(start, at(vl, "name"), volumes, v.Name, "Volume names should be unique in the pod")
				for _, o := range []struct {
					k string
					m map[string]any
				}{{"configMap", v.ConfigMap}, {"secret", v.Secret}, {"emptyDir", v.EmptyDir},
					{"persistentVolumeClaim", v.PersistentVolumeClaim}, {"nfs", v.NFS}, {"projected", v.Projected},
					{"downwardAPI", v.DownwardAPI}, {"csi", v.CSI}} {
					c.object(at(vl, o.k), o.m)
				}
			})
		}
	}
	c.checkMounts(at(loc, "volume_mounts"), r.VolumeMounts, volumes)
	containers := map[string]bool{}
	c.checkContainers(at(loc, "init_containers"), r.InitContainers, volumes, containers)
	c.checkContainers(at(loc, "sidecars"), r.Sidecars, volumes, containers)
	c.sortByField(start, loc, r)
}

// unique records name in seen and reports a duplicate at loc, once the
// name passed its shape checks (c.clean since start).
func (c *checker) unique(start int, loc []any, seen map[string]bool, name, msg string) {
	if !c.clean(start, loc) {
		return
	}
	if seen[name] {
		c.add(loc, apierr.TypeDuplicate, msg)
	}
	seen[name] = true
}

func (c *checker) limitProblem(loc []any, p [2]string, limitGiven bool) {
	if limitGiven {
		c.add(at(loc, p[1]), apierr.TypeGreaterThanEqual, "Limit should be greater than or equal to "+p[0])
	} else {
		c.add(at(loc, p[0]), apierr.TypeLessThanEqual, "Request should be less than or equal to "+p[1])
	}
}

func (c *checker) checkStringMap(loc []any, m map[string]string, labels bool) {
	if !c.items(loc, len(m), c.lim.MaxMapEntries) {
		return
	}
	for _, k := range sortedKeys(m) {
		c.pattern(at(loc, k), validQualifiedName(k), qualNamePattern+" (key)")
		v := m[k]
		if labels {
			c.pattern(at(loc, k), validLabelValue(v), labelValPattern)
		} else if len(v) > c.lim.MaxStringBytes {
			c.add(at(loc, k), apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d bytes", c.lim.MaxStringBytes))
		}
	}
}

func (c *checker) checkMounts(loc []any, mounts []VolumeMount, volumes map[string]bool) {
	if !c.items(loc, len(mounts), c.lim.MaxItems) {
		return
	}
	for i := range mounts {
		m, ml := &mounts[i], at(loc, i)
		c.item(ml, m, func(int) {
			if m.Name != "" && !volumes[m.Name] {
				c.add(at(ml, "name"), apierr.TypeUnknownReference, "Volume mount should name a volume of resource_spec.volumes")
			}
		})
	}
}

func (c *checker) checkContainers(loc []any, cs []Container, volumes, names map[string]bool) {
	if !c.items(loc, len(cs), c.lim.MaxItems) {
		return
	}
	max := c.lim.MaxStringBytes
	for i := range cs {
		ct, cl := &cs[i], at(loc, i)
		c.item(cl, ct, func(start int) {
			c.unique(start, at(cl, "name"), names, ct.Name, "Container names should be unique in the pod")
			for _, l := range []struct {
				k  string
				ss []string
			}{{"command", ct.Command}, {"args", ct.Args}} {
				if c.items(at(cl, l.k), len(l.ss), c.lim.MaxItems) {
					for j, s := range l.ss {
						if len(s) > max {
							c.add(at(cl, l.k, j), apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d bytes", max))
						}
					}
				}
			}
			if c.items(at(cl, "env"), len(ct.Env), c.lim.MaxItems) {
				for j := range ct.Env {
					e, el := &ct.Env[j], at(cl, "env", j)
					c.item(el, e, func(int) {
						if e.ValueFrom != nil && e.Value != nil && *e.Value != "" {
							c.add(at(el, "valueFrom"), apierr.TypeValueError, "valueFrom cannot be used when value is non-empty")
						}
						c.object(at(el, "valueFrom"), e.ValueFrom)
					})
				}
			}
			if c.items(at(cl, "envFrom"), len(ct.EnvFrom), c.lim.MaxItems) {
				for j, o := range ct.EnvFrom {
					c.object(at(cl, "envFrom", j), o)
				}
			}
			if rr := ct.Resources; rr != nil {
				for _, m := range []struct {
					k string
					m map[string]string
				}{{"limits", rr.Limits}, {"requests", rr.Requests}} {
					ml := at(cl, "resources", m.k)
					if c.items(ml, len(m.m), c.lim.MaxMapEntries) {
						for _, k := range sortedKeys(m.m) {
							c.pattern(at(ml, k), validQualifiedName(k), qualNamePattern)
							if v := m.m[k]; v == "" || len(v) > 64 {
								c.add(at(ml, k), apierr.TypeValueError, "Quantity should have 1 to 64 characters")
							}
						}
					}
				}
			}
			c.checkMounts(at(cl, "volumeMounts"), ct.VolumeMounts, volumes)
			c.object(at(cl, "securityContext"), ct.SecurityContext)
		})
	}
}

// WithDefaults returns a copy of r with the documented defaults applied:
// cpu_limit = 2x cpu, memory_limit_mb = 2x memory_mb, queue_min_scale and
// queue_max_scale = min_scale and max_scale, queue_cpu = cpu,
// queue_cpu_limit = 2x queue_cpu, queue_memory_mb = memory_mb,
// queue_memory_limit_mb = 2x queue_memory_mb, db_cpu_limit = 2x db_cpu,
// db_memory_limit_mb = 2x db_memory_mb. Fields with no default and no value
// stay nil. Deployers call it; the stored spec is never rewritten.
func (r ResourceSpec) WithDefaults() ResourceSpec {
	twiceF := func(v *float64) *float64 {
		if v == nil {
			return nil
		}
		return new(2 * *v)
	}
	twiceI := func(v *int64) *int64 {
		if v == nil {
			return nil
		}
		return new(2 * *v)
	}
	or := func(v, d *int64) *int64 {
		if v != nil {
			return v
		}
		return d
	}
	orF := func(v, d *float64) *float64 {
		if v != nil {
			return v
		}
		return d
	}
	d := r
	d.CPULimit = orF(r.CPULimit, twiceF(r.CPU))
	d.MemoryLimitMB = or(r.MemoryLimitMB, twiceI(r.MemoryMB))
	d.QueueMinScale = or(r.QueueMinScale, r.MinScale)
	d.QueueMaxScale = or(r.QueueMaxScale, r.MaxScale)
	d.QueueCPU = orF(r.QueueCPU, r.CPU)
	d.QueueCPULimit = orF(r.QueueCPULimit, twiceF(d.QueueCPU))
	d.QueueMemoryMB = or(r.QueueMemoryMB, r.MemoryMB)
	d.QueueMemoryLimitMB = or(r.QueueMemoryLimitMB, twiceI(d.QueueMemoryMB))
	d.DBCPULimit = orF(r.DBCPULimit, twiceF(r.DBCPU))
	d.DBMemoryLimitMB = or(r.DBMemoryLimitMB, twiceI(r.DBMemoryMB))
	return d
}
