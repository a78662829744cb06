package controlplane

import (
	"encoding/json"
	"fmt"
	"math"
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
	d, ps, aliased := draftOf(req.Name, req.Source, req.SourceConfig, req.SourceRevisionConfig)
	c := &checker{lim: cp.lim, ps: ps}
	c.ps = applyCreateTable(d, d.Source, c.ps, cp.mutation)
	c.checkDeploymentValuesBefore(d)
	d.Secrets = c.secrets([]any{"body", "secrets"}, req.Secrets)
	tags := c.tagValueIDs([]any{"body", "tag_value_ids"}, req.TagValueIDs)
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
	if t := sc.DeploymentType; t != nil && *t != DeploymentTypeDevFree && *t != DeploymentTypeDev && *t != DeploymentTypeProd {
		c.add(bodyLoc(sl, "deployment_type"), apierr.TypeLiteralError, "Input should be 'dev_free', 'dev' or 'prod'")
	}
	c.optStr(bodyLoc(sl, "custom_url"), sc.CustomURL, max)
	if r := sc.ResourceSpec; r != nil {
		loc := bodyLoc(sl, "resource_spec")
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
		if r.ServiceAccountName != nil {
			c.pattern(at(loc, "service_account_name"), validDNSSubdomain(*r.ServiceAccountName), dnsSubPattern)
		}
		c.checkResourceSpec(loc, r, len(c.ps) != before)
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
