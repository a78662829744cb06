package controlplane

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/storemem"
)

// fullSpecRequest is a create with every resource_spec number, labels,
// annotations, a service account, volumes, mounts and a sidecar.
const fullSpecRequest = `{"name": "agent", "source": "external_docker",
	"source_config": {"resource_spec": {"min_scale": 1, "max_scale": 4, "cpu": 0.5, "cpu_limit": 1.5, "memory_mb": 512,
		"memory_limit_mb": 1024, "queue_min_scale": 1, "queue_max_scale": 2, "queue_cpu": 1, "queue_cpu_limit": 2,
		"queue_memory_mb": 256, "queue_memory_limit_mb": 512, "orchestrator_cpu": 1, "orchestrator_cpu_limit": 1,
		"orchestrator_memory_mb": 1, "orchestrator_memory_limit_mb": 1, "orchestrator_min_scale": 1, "orchestrator_max_scale": 1,
		"executor_cpu": 1, "executor_cpu_limit": 1, "executor_memory_mb": 1, "executor_memory_limit_mb": 1,
		"redis_memory_mb": 64, "db_cpu": 0.25, "db_cpu_limit": 0.5, "db_memory_mb": 256, "db_memory_limit_mb": 256,
		"db_storage_gi": 10, "db_max_connections": 100,
		"labels": {"team": "ml", "example.com/tier": "a"}, "annotations": {"note": "x"},
		"service_account_name": "agent-sa", "image_pull_secrets": [{"name": "regcred"}],
		"volumes": [{"name": "data", "emptyDir": {}}], "volume_mounts": [{"name": "data", "mountPath": "/data"}],
		"sidecars": [{"name": "s", "image": "busybox", "env": [{"name": "A", "value": "v"}], "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]}},
	"source_revision_config": {"image_uri": "registry.example.com/agent:1.0.0"},
	"secrets": [{"name": "OPENAI_API_KEY", "value": "sk-0123456789"}]}`

// BenchmarkCheckCreateFullSpec measures the checks of a create with a full
// resource_spec (no store): the plain checks of before the shape tags
// (baseline, kept below) against checkCreate with validator (candidate),
// in alternating rounds of one run.
func BenchmarkCheckCreateFullSpec(b *testing.B) {
	var req CreateDeploymentRequest
	if err := json.Unmarshal([]byte(fullSpecRequest), &req); err != nil {
		b.Fatal(err)
	}
	cp := New(storemem.New(), nil)
	if _, _, ps := cp.checkCreate(&req); len(ps) != 0 {
		b.Fatal(ps)
	}
	if _, _, ps := cp.checkCreateBefore(&req); len(ps) != 0 {
		b.Fatal(ps)
	}
	benchcmp.Interleave(b, func(n int) {
		for range n {
			cp.checkCreateBefore(&req)
		}
	}, func(n int) {
		for range n {
			cp.checkCreate(&req)
		}
	})
}

// checkCreateBefore is checkCreate as it was before the shape tags: the
// same steps, with checkDeploymentValuesBefore.
func (cp *ControlPlane) checkCreateBefore(req *CreateDeploymentRequest) (*Deployment, []string, []apierr.Problem) {
	d, ps, aliased := draftOf(req)
	c := &checker{lim: cp.lim, ps: ps}
	known := knownSource(d.Source)
	switch {
	case d.Source == "":
		c.add([]any{"body", "source"}, apierr.TypeMissing, "Field required")
	case !known:
		c.add([]any{"body", "source"}, apierr.TypeLiteralError, "Input should be 'github', 'external_docker', 'internal_source' or 'internal_docker'")
	case !cp.offered(d.Source):
		c.add([]any{"body", "source"}, apierr.TypeSourceNotOffered, "Source '"+string(d.Source)+"' is not offered by this control plane")
	}
	if known {
		c.ps = applyCreateTable(d, d.Source, c.ps, cp.hooks)
	} else if d.Name == "" {
		c.add([]any{"body", "name"}, apierr.TypeMissing, "Field required")
	}
	c.checkDeploymentValuesBefore(d)
	d.Secrets = c.secretsBefore([]any{"body", "secrets"}, req.Secrets)
	tags := c.tagValueIDs([]any{"body", "tag_value_ids"}, req.TagValueIDs)
	if d.Source == SourceGitHub {
		c.ps = checkTagRef(&Deployment{SourceConfig: d.SourceConfig, SourceRevisionConfig: d.SourceRevisionConfig}, c.ps, cp.hooks)
	}
	if known {
		withDefaults := &Deployment{Source: d.Source, SourceConfig: d.SourceConfig}
		applyCreateDefaults(withDefaults, d.Source)
		c.ps = checkScaleToZero(withDefaults, c.ps)
	}
	return d, tags, aliasLocs(c.ps, aliased)
}

func (c *checker) checkDeploymentValuesBefore(d *Deployment) {
	if d.Name != "" {
		c.pattern(bodyLoc([]string{"name"}), validName(d.Name), namePattern)
	}
	sc, sl := &d.SourceConfig, []string{"source_config"}
	max := c.lim.MaxStringBytes
	if sc.IntegrationID != nil {
		c.uuid(bodyLoc(sl, "integration_id"), *sc.IntegrationID)
	}
	c.optStr(bodyLoc(sl, "repo_url"), sc.RepoURL, max)
	if t := sc.DeploymentType; t != nil && !slices.Contains(DeploymentTypes(), *t) {
		c.add(bodyLoc(sl, "deployment_type"), apierr.TypeLiteralError, "Input should be 'dev_free', 'dev', 'prod', 'dev_zero' or 'dev_free_zero'")
	}
	c.optStr(bodyLoc(sl, "custom_url"), sc.CustomURL, max)
	if sc.ResourceSpec != nil {
		c.checkResourceSpecBefore(bodyLoc(sl, "resource_spec"), sc.ResourceSpec)
	}
	if sc.ListenerID != nil {
		c.uuid(bodyLoc(sl, "listener_id"), *sc.ListenerID)
	}
	if lc := sc.ListenerConfig; lc != nil && lc.K8sNamespace != nil {
		c.pattern(bodyLoc(sl, "listener_config", "k8s_namespace"), validDNSLabel(*lc.K8sNamespace), dnsLabelPattern)
	}
	c.optStr(bodyLoc(sl, "install_command"), sc.InstallCommand, max)
	c.optStr(bodyLoc(sl, "build_command"), sc.BuildCommand, max)
	src, rl := &d.SourceRevisionConfig, []string{"source_revision_config"}
	c.optStr(bodyLoc(rl, "repo_ref"), src.RepoRef, max)
	c.optStr(bodyLoc(rl, "graph_config_path"), src.GraphConfigPath, max)
	c.optStr(bodyLoc(rl, "image_uri"), src.ImageURI, max)
	c.optStr(bodyLoc(rl, "source_tarball_path"), src.SourceTarballPath, max)
}

func (c *checker) intRangeBefore(loc []any, v *int64, min int64) {
	if v == nil {
		return
	}
	switch {
	case *v < min:
		typ, msg := apierr.TypeGreaterThanEqual, fmt.Sprintf("Input should be greater than or equal to %d", min)
		if min == 1 {
			typ, msg = apierr.TypeGreaterThan, "Input should be greater than 0"
		}
		c.add(loc, typ, msg)
	case *v > maxNumber:
		c.add(loc, apierr.TypeLessThanEqual, fmt.Sprintf("Input should be less than or equal to %d", maxNumber))
	}
}

func (c *checker) positiveFloatBefore(loc []any, v *float64) {
	if v == nil {
		return
	}
	switch {
	case math.IsNaN(*v) || !(*v > 0):
		c.add(loc, apierr.TypeGreaterThan, "Input should be greater than 0")
	case *v > maxNumber:
		c.add(loc, apierr.TypeLessThanEqual, fmt.Sprintf("Input should be less than or equal to %d", maxNumber))
	}
}

// The plain checks of a resource_spec and of secrets before the shape tags.

func (c *checker) secretsBefore(loc []any, in []SecretInput) []Secret {
	if in == nil || !c.items(loc, len(in), c.lim.MaxSecrets) {
		return nil
	}
	out := make([]Secret, len(in))
	seen := make(map[string]bool, len(in))
	for i, s := range in {
		nl := at(loc, i, "name")
		if s.Name == "" {
			c.add(nl, apierr.TypeMissing, "Field required")
		} else if c.pattern(nl, len(s.Name) <= 256 && validCIdent(s.Name), cIdentPattern+" (at most 256 characters)") {
			if seen[s.Name] {
				c.add(nl, apierr.TypeDuplicate, "Secret names should be unique")
			}
			seen[s.Name] = true
		}
		out[i].Name = s.Name
		switch {
		case s.Value == nil:
			c.add(at(loc, i, "value"), apierr.TypeMissing, "Field required")
		case len(*s.Value) > c.lim.MaxSecretValueBytes:
			c.add(at(loc, i, "value"), apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d bytes", c.lim.MaxSecretValueBytes))
		default:
			out[i].Value = *s.Value
		}
	}
	return out
}

func (c *checker) checkResourceSpecBefore(loc []any, r *ResourceSpec) {
	before := len(c.ps)
	scales, ints, cpus := resourceNumbers(r)
	for _, k := range sortedKeys(scales) {
		c.intRangeBefore(at(loc, k), scales[k], 0)
	}
	for _, k := range sortedKeys(ints) {
		c.intRangeBefore(at(loc, k), ints[k], 1)
	}
	for _, k := range sortedKeys(cpus) {
		c.positiveFloatBefore(at(loc, k), cpus[k])
	}
	if len(c.ps) == before {
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

	c.checkStringMap(at(loc, "labels"), r.Labels, true)
	c.checkStringMap(at(loc, "annotations"), r.Annotations, false)
	if r.ServiceAccountName != nil {
		s := *r.ServiceAccountName
		c.pattern(at(loc, "service_account_name"), validDNSSubdomain(s), dnsSubPattern)
	}
	if c.items(at(loc, "image_pull_secrets"), len(r.ImagePullSecrets), c.lim.MaxItems) {
		for i, ref := range r.ImagePullSecrets {
			c.k8sNameBefore(at(loc, "image_pull_secrets", i, "name"), ref.Name, validDNSSubdomain, dnsSubPattern)
		}
	}
	volumes := map[string]bool{}
	if c.items(at(loc, "volumes"), len(r.Volumes), c.lim.MaxItems) {
		for i, v := range r.Volumes {
			vl := at(loc, "volumes", i)
			if c.k8sNameBefore(at(vl, "name"), v.Name, validDNSLabel, dnsLabelPattern) {
				if volumes[v.Name] {
					c.add(at(vl, "name"), apierr.TypeDuplicate, "Volume names should be unique in the pod")
				}
				volumes[v.Name] = true
			}
			for _, o := range []struct {
				k string
				m map[string]any
			}{{"configMap", v.ConfigMap}, {"secret", v.Secret}, {"emptyDir", v.EmptyDir},
				{"persistentVolumeClaim", v.PersistentVolumeClaim}, {"nfs", v.NFS}, {"projected", v.Projected},
				{"downwardAPI", v.DownwardAPI}, {"csi", v.CSI}} {
				c.object(at(vl, o.k), o.m)
			}
		}
	}
	c.checkMountsBefore(at(loc, "volume_mounts"), r.VolumeMounts, volumes)
	containers := map[string]bool{}
	c.checkContainersBefore(at(loc, "init_containers"), r.InitContainers, volumes, containers)
	c.checkContainersBefore(at(loc, "sidecars"), r.Sidecars, volumes, containers)
}

func (c *checker) k8sNameBefore(loc []any, s string, valid func(string) bool, pat string) bool {
	if s == "" {
		c.add(loc, apierr.TypeMissing, "Field required")
		return false
	}
	return c.pattern(loc, valid(s), pat)
}

func (c *checker) checkMountsBefore(loc []any, mounts []VolumeMount, volumes map[string]bool) {
	if !c.items(loc, len(mounts), c.lim.MaxItems) {
		return
	}
	max := c.lim.MaxStringBytes
	for i, m := range mounts {
		ml := at(loc, i)
		if m.Name == "" {
			c.add(at(ml, "name"), apierr.TypeMissing, "Field required")
		} else if !volumes[m.Name] {
			c.add(at(ml, "name"), apierr.TypeUnknownReference, "Volume mount should name a volume of resource_spec.volumes")
		}
		if m.MountPath == "" {
			c.add(at(ml, "mountPath"), apierr.TypeMissing, "Field required")
		} else {
			c.str(at(ml, "mountPath"), m.MountPath, max)
		}
		c.optStr(at(ml, "subPath"), m.SubPath, max)
		c.optStr(at(ml, "mountPropagation"), m.MountPropagation, max)
		c.optStr(at(ml, "subPathExpr"), m.SubPathExpr, max)
	}
}

func (c *checker) checkContainersBefore(loc []any, cs []Container, volumes, names map[string]bool) {
	if !c.items(loc, len(cs), c.lim.MaxItems) {
		return
	}
	max := c.lim.MaxStringBytes
	for i, ct := range cs {
		cl := at(loc, i)
		if c.k8sNameBefore(at(cl, "name"), ct.Name, validDNSLabel, dnsLabelPattern) {
			if names[ct.Name] {
				c.add(at(cl, "name"), apierr.TypeDuplicate, "Container names should be unique in the pod")
			}
			names[ct.Name] = true
		}
		if ct.Image == "" {
			c.add(at(cl, "image"), apierr.TypeMissing, "Field required")
		} else {
			c.str(at(cl, "image"), ct.Image, max)
		}
		if p := ct.ImagePullPolicy; p != nil && *p != "Always" && *p != "Never" && *p != "IfNotPresent" {
			c.add(at(cl, "imagePullPolicy"), apierr.TypeLiteralError, "Input should be 'Always', 'Never' or 'IfNotPresent'")
		}
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
		c.optStr(at(cl, "workingDir"), ct.WorkingDir, max)
		if c.items(at(cl, "env"), len(ct.Env), c.lim.MaxItems) {
			for j, e := range ct.Env {
				el := at(cl, "env", j)
				if e.Name == "" {
					c.add(at(el, "name"), apierr.TypeMissing, "Field required")
				} else {
					c.pattern(at(el, "name"), len(e.Name) <= 256 && validCIdent(e.Name), cIdentPattern+" (at most 256 characters)")
				}
				if e.Value != nil && len(*e.Value) > max {
					c.add(at(el, "value"), apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d bytes", max))
				}
				if e.ValueFrom != nil && e.Value != nil && *e.Value != "" {
					c.add(at(el, "valueFrom"), apierr.TypeValueError, "valueFrom cannot be used when value is non-empty")
				}
				c.object(at(el, "valueFrom"), e.ValueFrom)
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
		c.checkMountsBefore(at(cl, "volumeMounts"), ct.VolumeMounts, volumes)
		c.object(at(cl, "securityContext"), ct.SecurityContext)
		if p := ct.RestartPolicy; p != nil && *p != "Always" && *p != "OnFailure" {
			c.add(at(cl, "restartPolicy"), apierr.TypeLiteralError, "Input should be 'Always' or 'OnFailure'")
		}
	}
}

// BenchmarkCheckCreateFullSpecAllocs is BenchmarkCheckCreateFullSpec as two
// sequential sub-benchmarks, for the allocations of each side.
func BenchmarkCheckCreateFullSpecAllocs(b *testing.B) {
	var req CreateDeploymentRequest
	if err := json.Unmarshal([]byte(fullSpecRequest), &req); err != nil {
		b.Fatal(err)
	}
	cp := New(storemem.New(), nil)
	benchcmp.CompareNamed(b, "plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cp.checkCreateBefore(&req)
		}
	}, "tags", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cp.checkCreate(&req)
		}
	})
}

// optStr checks an optional string (nil is fine) like str.
func (c *checker) optStr(loc []any, s *string, max int) {
	if s != nil {
		c.str(loc, *s, max)
	}
}
