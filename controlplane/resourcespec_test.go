package controlplane_test

import (
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
)

// TestResourceSpecRules has one row per ResourceSpec and Kubernetes
// sub-object rule; each row creates an external_docker deployment with the
// given resource_spec. Problem locs are below body.source_config.resource_spec.
func TestResourceSpecRules(t *testing.T) {
	tests := []struct {
		rule string
		spec string
		want []string // "loc: type" with the common prefix removed
	}{
		{rule: "all numeric fields, cpu as decimals", spec: `{"min_scale": 0, "max_scale": 2, "cpu": 0.5, "cpu_limit": 1.5, "memory_mb": 512,
			"memory_limit_mb": 1024, "queue_min_scale": 1, "queue_max_scale": 1, "queue_cpu": 1, "queue_cpu_limit": 2,
			"queue_memory_mb": 256, "queue_memory_limit_mb": 512, "orchestrator_cpu": 1, "orchestrator_cpu_limit": 1,
			"orchestrator_memory_mb": 1, "orchestrator_memory_limit_mb": 1, "orchestrator_min_scale": 1, "orchestrator_max_scale": 1,
			"executor_cpu": 1, "executor_cpu_limit": 1, "executor_memory_mb": 1, "executor_memory_limit_mb": 1,
			"redis_memory_mb": 64, "db_cpu": 0.25, "db_cpu_limit": 0.5, "db_memory_mb": 256, "db_memory_limit_mb": 256,
			"db_storage_gi": 10, "db_max_connections": 100}`},
		{rule: "an empty spec", spec: `{}`},
		{rule: "scales >= 0", spec: `{"min_scale": -1, "queue_max_scale": -2}`,
			want: []string{"min_scale: greater_than_equal", "queue_max_scale: greater_than_equal"}},
		{rule: "min_scale <= max_scale", spec: `{"min_scale": 3, "max_scale": 2}`, want: []string{"min_scale: less_than_equal"}},
		{rule: "queue scales against the main ones they default to", spec: `{"min_scale": 1, "max_scale": 2, "queue_max_scale": 0}`,
			want: []string{"queue_max_scale: greater_than_equal"}},
		{rule: "cpu and memory > 0", spec: `{"cpu": 0, "memory_mb": 0, "db_cpu": -0.5, "redis_memory_mb": 0, "db_storage_gi": 0}`,
			want: []string{"db_storage_gi: greater_than", "memory_mb: greater_than", "redis_memory_mb: greater_than", "cpu: greater_than", "db_cpu: greater_than"}},
		{rule: "limits >= requests", spec: `{"cpu": 2, "cpu_limit": 1, "memory_mb": 512, "memory_limit_mb": 256, "db_cpu": 1, "db_cpu_limit": 0.5}`,
			want: []string{"memory_limit_mb: greater_than_equal", "cpu_limit: greater_than_equal", "db_cpu_limit: greater_than_equal"}},
		{rule: "a limit against the defaulted request (queue_cpu = cpu)", spec: `{"cpu": 2, "queue_cpu_limit": 1}`,
			want: []string{"queue_cpu_limit: greater_than_equal"}},
		{rule: "a request above its defaulted limit is fine (limit = 2x request)", spec: `{"cpu": 2, "memory_mb": 100}`},
		{rule: "numbers are bounded", spec: `{"memory_mb": 2000000000}`, want: []string{"memory_mb: less_than_equal"}},
		{rule: "labels and annotations keys are qualified names; label values are short", spec: `{"labels": {"team": "ml", "example.com/tier": "a_b-c.d", "-bad": "x", "ok": "bad value"},
			"annotations": {"note": "anything at all goes here", "bad key!": "x"}}`,
			want: []string{"labels.-bad: string_pattern_mismatch", "labels.ok: string_pattern_mismatch", "annotations.bad key!: string_pattern_mismatch"}},
		{rule: "service_account_name is a DNS subdomain", spec: `{"service_account_name": "Agent SA"}`,
			want: []string{"service_account_name: string_pattern_mismatch"}},
		{rule: "image_pull_secrets name required", spec: `{"image_pull_secrets": [{"name": "regcred"}, {}]}`,
			want: []string{"image_pull_secrets.1.name: missing"}},
		{rule: "volume names are DNS labels, unique", spec: `{"volumes": [{"name": "data", "emptyDir": {}}, {"name": "data"}, {"name": "Data"}, {}]}`,
			want: []string{"volumes.1.name: duplicate", "volumes.2.name: string_pattern_mismatch", "volumes.3.name: missing"}},
		{rule: "volume mounts name an existing volume and need a mountPath",
			spec: `{"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "pvc"}}], "volume_mounts": [{"name": "data", "mountPath": "/data", "readOnly": true}, {"name": "other", "mountPath": "/o"}, {"name": "data"}]}`,
			want: []string{"volume_mounts.1.name: unknown_reference", "volume_mounts.2.mountPath: missing"}},
		{rule: "containers: DNS-label names unique across init containers and sidecars, image required",
			spec: `{"init_containers": [{"name": "init", "image": "busybox"}], "sidecars": [{"name": "init", "image": "x"}, {"name": "Side", "image": "x"}, {"name": "s"}]}`,
			want: []string{"sidecars.0.name: duplicate", "sidecars.1.name: string_pattern_mismatch", "sidecars.2.image: missing"}},
		{rule: "containers: enums", spec: `{"sidecars": [{"name": "s", "image": "x", "imagePullPolicy": "Sometimes", "restartPolicy": "Never"}, {"name": "t", "image": "x", "imagePullPolicy": "IfNotPresent", "restartPolicy": "Always"}]}`,
			want: []string{"sidecars.0.imagePullPolicy: literal_error", "sidecars.0.restartPolicy: literal_error"}},
		{rule: "env: C identifiers; value and valueFrom exclusive",
			spec: `{"sidecars": [{"name": "s", "image": "x", "env": [{"name": "OK_1", "value": "v"}, {"name": "1BAD"}, {"name": "A", "value": "v", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
				{"name": "B", "value": "", "valueFrom": {"fieldRef": {}}}, {"value": "x"}]}]}`,
			want: []string{"sidecars.0.env.1.name: string_pattern_mismatch", "sidecars.0.env.2.valueFrom: value_error", "sidecars.0.env.4.name: missing"}},
		{rule: "container volume mounts name an existing volume",
			spec: `{"volumes": [{"name": "v"}], "sidecars": [{"name": "s", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/v"}, {"name": "w", "mountPath": "/w"}]}]}`,
			want: []string{"sidecars.0.volumeMounts.1.name: unknown_reference"}},
		{rule: "container resources", spec: `{"sidecars": [{"name": "s", "image": "x", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": ""}}}]}`,
			want: []string{"sidecars.0.resources.requests.cpu: value_error"}},
		{rule: "free-form objects are capped", spec: `{"volumes": [{"name": "v", "configMap": {"name": "` + strings.Repeat("x", 20000) + `"}}]}`,
			want: []string{"volumes.0.configMap: too_long"}},
		{rule: "lists are capped", spec: `{"sidecars": [{"name": "s", "image": "x", "args": [` + strings.Repeat(`"a",`, 64) + `"a"]}]}`,
			want: []string{"sidecars.0.args: too_long"}},
	}
	const prefix = "body.source_config.resource_spec."
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			f := newFixture(t, nil)
			body := `{"name": "agent", "source": "external_docker", "source_config": {"resource_spec": ` + tt.spec + `},
				"source_revision_config": {"image_uri": "r/agent:1"}}`
			d, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, body))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				// The stored spec is what the client sent.
				diff(t, "resource_spec", toMap(t, decode[controlplane.ResourceSpec](t, tt.spec)), toMap(t, d.SourceConfig.ResourceSpec))
				return
			}
			got := locTypes(problems(t, err))
			for i := range got {
				got[i] = strings.TrimPrefix(got[i], prefix)
			}
			diff(t, "problems", tt.want, got)
		})
	}
}

func TestResourceSpecWithDefaults(t *testing.T) {
	spec := decode[controlplane.ResourceSpec](t, `{"min_scale": 1, "max_scale": 4, "cpu": 1.5, "memory_mb": 1024, "queue_cpu_limit": 5, "db_cpu": 0.5, "db_memory_mb": 256}`)
	want := decode[controlplane.ResourceSpec](t, `{"min_scale": 1, "max_scale": 4, "cpu": 1.5, "cpu_limit": 3, "memory_mb": 1024, "memory_limit_mb": 2048,
		"queue_min_scale": 1, "queue_max_scale": 4, "queue_cpu": 1.5, "queue_cpu_limit": 5, "queue_memory_mb": 1024, "queue_memory_limit_mb": 2048,
		"db_cpu": 0.5, "db_cpu_limit": 1, "db_memory_mb": 256, "db_memory_limit_mb": 512}`)
	diff(t, "defaults", *want, spec.WithDefaults())
	diff(t, "empty spec", controlplane.ResourceSpec{}, controlplane.ResourceSpec{}.WithDefaults())
}
