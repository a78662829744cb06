package deployk8s

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	asv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/deployplane/deployplane/controlplane"
)

// The labels every object of a deployment carries. Tenant is the tenant
// when it is a valid label value, else a hash of it (AnnotationTenant
// always holds it as it is).
const (
	LabelInstance   = "deployplane.dev/instance"
	LabelTenant     = "deployplane.dev/tenant"
	LabelDeployment = "deployplane.dev/deployment"
	LabelRevision   = "deployplane.dev/revision"
	// LabelComponent says which object of the deployment it is: owner,
	// secrets, services, api, queue, db or redis (the API server's
	// Deployment, Service, autoscaler, PodDisruptionBudget, Ingress or
	// HTTPRoute are api).
	LabelComponent = "deployplane.dev/component"

	AnnotationTenant = "deployplane.dev/tenant"
)

// The components (LabelComponent values).
const (
	componentOwner    = "owner"
	componentSecrets  = "secrets"
	componentServices = "services"
	componentAPI      = "api"
	componentQueue    = "queue"
	componentDB       = "db"
	componentRedis    = "redis"
)

// Object names, all derived from the deployment's id (a UUID): "dp-<id>"
// is 39 characters, so every suffix keeps names within a DNS label.
func ownerName(dep string) string    { return "dp-" + dep }
func serviceName(dep string) string  { return "dp-" + dep }
func apiName(dep string) string      { return "dp-" + dep + "-api" }
func queueName(dep string) string    { return "dp-" + dep + "-queue" }
func dbName(dep string) string       { return "dp-" + dep + "-db" }
func redisName(dep string) string    { return "dp-" + dep + "-redis" }
func servicesName(dep string) string { return "dp-" + dep + "-services" }
func secretName(dep, rev string) string {
	return "dp-" + dep + "-" + rev
}

// tenantLabel is the tenant as a label value.
func tenantLabel(tenant string) string {
	if len(validation.IsValidLabelValue(tenant)) == 0 {
		return tenant
	}
	h := sha256.Sum256([]byte(tenant))
	return "h-" + hex.EncodeToString(h[:12])
}

// objects is everything a revision becomes, built from its Work.
type objects struct {
	d         *Deployer
	w         *controlplane.Work
	ns        string
	spec      controlplane.ResourceSpec // with defaults
	image     string
	owner     types.UID
	dbEnabled bool
	// pullSecret is the image pull secret of the server's registry
	// (pullsecret.go); "": none.
	pullSecret string
	// exposeUnknown: the deployment's address cannot be made (a record
	// without the deployment's name, for a template with {name}): its
	// Ingress or HTTPRoute is left as it is.
	exposeUnknown bool
	// What the objects keep of the cluster's (observe): the replicas an
	// autoscaler gave the API server and queue, the database claim
	// template's size (a StatefulSet's claim templates cannot change; nil
	// for a new one) and the database's password.
	replicas map[string]int32
	dbClaim  *resource.Quantity
	password string
	// generations are the Deployments' and the StatefulSet's generations
	// as applied, by name (a rollout waits for the caches to have them).
	generations map[string]int64
}

// applied records the generation of an object as applied.
func (o *objects) applied(name string, generation int64) {
	if o.generations == nil {
		o.generations = map[string]int64{}
	}
	o.generations[name] = generation
}

// generation is an object's generation as applied; 0 when unknown.
func (o *objects) generation(name string) int64 { return o.generations[name] }

// observe takes from the cluster's current objects (nil where they do not
// exist) what the revision's objects keep: see objects.
func (o *objects) observe(api, queue *appsv1.Deployment, db *appsv1.StatefulSet, services *corev1.Secret) {
	o.replicas = map[string]int32{}
	for c, dp := range map[string]*appsv1.Deployment{componentAPI: api, componentQueue: queue} {
		if dp != nil && dp.Spec.Replicas != nil {
			o.replicas[c] = *dp.Spec.Replicas
		}
	}
	o.dbClaim = nil
	if db != nil {
		for _, t := range db.Spec.VolumeClaimTemplates {
			if q, ok := t.Spec.Resources.Requests[corev1.ResourceStorage]; t.Name == "data" && ok {
				o.dbClaim = &q
			}
		}
	}
	if services != nil && len(services.Data["POSTGRES_PASSWORD"]) > 0 {
		o.password = string(services.Data["POSTGRES_PASSWORD"])
	}
}

// dbStorage is the size db_storage_gi asks for (10 Gi by default).
func (o *objects) dbStorage() resource.Quantity {
	gi := int64(10)
	if o.spec.DBStorageGi != nil {
		gi = *o.spec.DBStorageGi
	}
	return *resource.NewQuantity(gi<<30, resource.BinarySI)
}

// labels are the labels of one of the deployment's objects: the spec's
// labels, then this package's (which win).
func (o *objects) labels(component string, withRevision bool) map[string]string {
	l := map[string]string{}
	maps.Copy(l, o.spec.Labels)
	l[LabelInstance] = o.d.o.Instance
	l[LabelTenant] = tenantLabel(o.w.Tenant)
	l[LabelDeployment] = o.w.Deployment.ID
	l[LabelComponent] = component
	if withRevision {
		l[LabelRevision] = o.w.Revision.ID
	}
	return l
}

func (o *objects) selector(component string) map[string]string {
	return map[string]string{LabelInstance: o.d.o.Instance, LabelDeployment: o.w.Deployment.ID, LabelComponent: component}
}

func (o *objects) annotations() map[string]string {
	a := map[string]string{}
	maps.Copy(a, o.spec.Annotations)
	a[AnnotationTenant] = o.w.Tenant
	return a
}

// metaObject is an apply configuration with object metadata.
type metaObject[T any] interface {
	WithLabels(map[string]string) T
	WithAnnotations(map[string]string) T
	WithOwnerReferences(...*metav1ac.OwnerReferenceApplyConfiguration) T
}

// withMeta sets the labels, annotations and owner of an object.
func withMeta[T metaObject[T]](o *objects, obj T, component string, withRevision bool) T {
	obj = obj.WithLabels(o.labels(component, withRevision)).WithAnnotations(o.annotations())
	if o.owner != "" {
		obj = obj.WithOwnerReferences(o.ownerReference())
	}
	return obj
}

// ownerConfigMap is the per-deployment object that owns all others.
func (o *objects) ownerConfigMap() *corev1ac.ConfigMapApplyConfiguration {
	c := withMeta(o, corev1ac.ConfigMap(ownerName(o.w.Deployment.ID), o.ns), componentOwner, false)
	return c.WithData(map[string]string{"tenant": o.w.Tenant, "deployment": o.w.Deployment.ID})
}

// secret holds the revision's secrets, read by its containers as
// environment variables (envFrom): their values appear nowhere else.
func (o *objects) secret() *corev1ac.SecretApplyConfiguration {
	data := map[string][]byte{}
	for _, s := range o.w.Secrets {
		data[s.Name] = []byte(s.Value)
	}
	return withMeta(o, corev1ac.Secret(secretName(o.w.Deployment.ID, o.w.Revision.ID), o.ns), componentSecrets, true).
		WithType(corev1.SecretTypeOpaque).WithData(data)
}

// servicesSecret holds the database's password and the DATABASE_URI and
// REDIS_URI the containers get.
func (o *objects) servicesSecret() *corev1ac.SecretApplyConfiguration {
	dep, password := o.w.Deployment.ID, o.password
	return withMeta(o, corev1ac.Secret(servicesName(dep), o.ns), componentServices, false).
		WithType(corev1.SecretTypeOpaque).WithData(map[string][]byte{
		"POSTGRES_PASSWORD": []byte(password),
		"DATABASE_URI": fmt.Appendf(nil, "postgres://postgres:%s@%s.%s.svc.cluster.local:5432/postgres?sslmode=disable",
			password, dbName(dep), o.ns),
		"REDIS_URI": fmt.Appendf(nil, "redis://%s.%s.svc.cluster.local:6379", redisName(dep), o.ns),
	})
}

func cpuQuantity(v *float64) *resource.Quantity {
	if v == nil {
		return nil
	}
	q := resource.NewMilliQuantity(int64(*v*1000+0.5), resource.DecimalSI)
	return q
}

func memQuantity(mb *int64) *resource.Quantity {
	if mb == nil {
		return nil
	}
	return resource.NewQuantity(*mb*1024*1024, resource.BinarySI)
}

// requirements are requests and limits; nil values set none.
func requirements(cpu, cpuLimit *float64, mem, memLimit *int64) *corev1ac.ResourceRequirementsApplyConfiguration {
	req, lim := corev1.ResourceList{}, corev1.ResourceList{}
	if q := cpuQuantity(cpu); q != nil {
		req[corev1.ResourceCPU] = *q
	}
	if q := cpuQuantity(cpuLimit); q != nil {
		lim[corev1.ResourceCPU] = *q
	}
	if q := memQuantity(mem); q != nil {
		req[corev1.ResourceMemory] = *q
	}
	if q := memQuantity(memLimit); q != nil {
		lim[corev1.ResourceMemory] = *q
	}
	r := corev1ac.ResourceRequirements()
	if len(req) > 0 {
		r.WithRequests(req)
	}
	if len(lim) > 0 {
		r.WithLimits(lim)
	}
	return r
}

// convert passes one of the spec's Kubernetes-shaped values (volumes,
// mounts, containers: the seed keeps Kubernetes' field names) to its
// apply configuration through JSON.
func convert[T any](v any) (*T, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	return out, nil
}

func convertAll[T, S any](vs []S) ([]*T, error) {
	out := make([]*T, 0, len(vs))
	for i := range vs {
		c, err := convert[T](&vs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// env is what the API server and queue containers get: the revision's
// secrets (envFrom its Secret), the port, the database's addresses, and
// its secret references (each a key of a Secret the namespace holds).
func (o *objects) env(c *corev1ac.ContainerApplyConfiguration) *corev1ac.ContainerApplyConfiguration {
	dep := o.w.Deployment.ID
	c.WithEnvFrom(corev1ac.EnvFromSource().WithSecretRef(corev1ac.SecretEnvSource().WithName(secretName(dep, o.w.Revision.ID))))
	c.WithEnv(corev1ac.EnvVar().WithName(o.d.o.PortEnv).WithValue(strconv.Itoa(int(o.d.o.ServerPort))))
	if o.dbEnabled {
		for _, k := range []string{"DATABASE_URI", "REDIS_URI"} {
			c.WithEnv(corev1ac.EnvVar().WithName(k).WithValueFrom(corev1ac.EnvVarSource().
				WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(servicesName(dep)).WithKey(k))))
		}
	}
	for _, r := range o.w.SecretReferences {
		c.WithEnv(corev1ac.EnvVar().WithName(r.Name).WithValueFrom(corev1ac.EnvVarSource().
			WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(r.SecretName).WithKey(r.SecretKey))))
	}
	return c
}

// podSpec is the pod of the API server (api) or the queue worker.
func (o *objects) podSpec(component string, res *corev1ac.ResourceRequirementsApplyConfiguration) (*corev1ac.PodSpecApplyConfiguration, error) {
	s := &o.spec
	main := corev1ac.Container().WithName(component).WithImage(o.image).WithResources(res)
	o.env(main)
	if component == componentAPI {
		main.WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(o.d.o.ServerPort)).
			WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().
				WithPath(o.d.o.ReadyPath).WithPort(intstr.FromInt32(o.d.o.ServerPort))).WithPeriodSeconds(5))
	}
	mounts, err := convertAll[corev1ac.VolumeMountApplyConfiguration](s.VolumeMounts)
	if err != nil {
		return nil, err
	}
	main.WithVolumeMounts(mounts...)
	p := corev1ac.PodSpec()
	inits, err := convertAll[corev1ac.ContainerApplyConfiguration](s.InitContainers)
	if err != nil {
		return nil, err
	}
	sidecars, err := convertAll[corev1ac.ContainerApplyConfiguration](s.Sidecars)
	if err != nil {
		return nil, err
	}
	for _, c := range sidecars {
		// Native sidecars: init containers that keep running.
		c.WithRestartPolicy(corev1.ContainerRestartPolicyAlways)
	}
	p.WithInitContainers(append(inits, sidecars...)...)
	p.WithContainers(main)
	vols, err := convertAll[corev1ac.VolumeApplyConfiguration](s.Volumes)
	if err != nil {
		return nil, err
	}
	p.WithVolumes(vols...)
	if s.ServiceAccountName != nil {
		p.WithServiceAccountName(*s.ServiceAccountName)
	}
	if o.pullSecret != "" {
		p.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(o.pullSecret))
	}
	for _, ps := range s.ImagePullSecrets {
		p.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(ps.Name))
	}
	return p, nil
}

func atLeast1(v *int64) int32 {
	if v == nil || *v < 1 {
		return 1
	}
	return int32(min(*v, 1<<30))
}

// scale is a component's minimum and maximum replicas (the maximum is
// the minimum without an autoscaler).
func (o *objects) scale(component string) (lo, hi int32) {
	mn, mx := o.spec.MinScale, o.spec.MaxScale
	if component == componentQueue {
		mn, mx = o.spec.QueueMinScale, o.spec.QueueMaxScale
	}
	lo, hi = atLeast1(mn), atLeast1(mn)
	if mx != nil && int64(lo) < *mx {
		hi = int32(min(*mx, 1<<30))
	}
	return lo, hi
}

// replicasOf is what a component's Deployment is applied with: its
// minimum, or, with an autoscaler, the replicas it set when within the
// autoscaler's range (so that a revision does not undo its scaling).
func (o *objects) replicasOf(component string) int32 {
	lo, hi := o.scale(component)
	if cur, ok := o.replicas[component]; ok && o.autoscaled(component) && cur >= lo && cur <= hi {
		return cur
	}
	return lo
}

// deployment is the API server's (api) or the queue worker's Deployment.
func (o *objects) deployment(component string) (*appsv1ac.DeploymentApplyConfiguration, error) {
	s := &o.spec
	name := apiName(o.w.Deployment.ID)
	res := requirements(s.CPU, s.CPULimit, s.MemoryMB, s.MemoryLimitMB)
	if component == componentQueue {
		name = queueName(o.w.Deployment.ID)
		res = requirements(s.QueueCPU, s.QueueCPULimit, s.QueueMemoryMB, s.QueueMemoryLimitMB)
	}
	pod, err := o.podSpec(component, res)
	if err != nil {
		return nil, err
	}
	tmpl := corev1ac.PodTemplateSpec().WithSpec(pod)
	tmpl = withMeta(o, tmpl, component, true)
	tmpl.OwnerReferences = nil // pods are owned by their ReplicaSet
	d := withMeta(o, appsv1ac.Deployment(name, o.ns), component, true)
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(o.selector(component))).
		WithTemplate(tmpl).
		WithProgressDeadlineSeconds(int32(o.d.o.ProgressDeadline.Seconds())).
		WithMinReadySeconds(int32(o.d.o.MinReady.Seconds())).
		WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RollingUpdateDeploymentStrategyType).
			WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
				WithMaxUnavailable(intstr.FromInt32(0)).WithMaxSurge(intstr.FromString("25%")))).
		WithReplicas(o.replicasOf(component))
	return d.WithSpec(spec), nil
}

// autoscaled: the component's replicas are an autoscaler's, not a
// drift: its own HorizontalPodAutoscaler's (hpaScaled), or an external
// scaler's (zero).
func (o *objects) autoscaled(component string) bool {
	return o.hpaScaled(component) || o.zero(component)
}

// hpaScaled: the component gets a HorizontalPodAutoscaler, its maximum
// being above its minimum, unless an external scaler owns its replicas.
func (o *objects) hpaScaled(component string) bool {
	lo, hi := o.scale(component)
	return hi > lo && !o.zero(component)
}

// zero: the component's minimum is 0 (min_scale 0, or queue_min_scale):
// it rolls out one replica, and an external scaler (KEDA-style) scales it
// to zero and back within the maximum; its replicas are that scaler's,
// and it gets no HorizontalPodAutoscaler of this package's (the scaler
// makes its own).
func (o *objects) zero(component string) bool {
	mn := o.spec.MinScale
	if component == componentQueue {
		mn = o.spec.QueueMinScale
	}
	return mn != nil && *mn == 0
}

// hpa scales a component from its minimum to its maximum on CPU.
func (o *objects) hpa(component string) *asv2ac.HorizontalPodAutoscalerApplyConfiguration {
	name := apiName(o.w.Deployment.ID)
	if component == componentQueue {
		name = queueName(o.w.Deployment.ID)
	}
	lo, hi := o.scale(component)
	h := withMeta(o, asv2ac.HorizontalPodAutoscaler(name, o.ns), component, false)
	return h.WithSpec(asv2ac.HorizontalPodAutoscalerSpec().
		WithScaleTargetRef(asv2ac.CrossVersionObjectReference().WithAPIVersion("apps/v1").WithKind("Deployment").WithName(name)).
		WithMinReplicas(lo).WithMaxReplicas(hi).
		WithMetrics(asv2ac.MetricSpec().WithType(autoscalingv2.ResourceMetricSourceType).
			WithResource(asv2ac.ResourceMetricSource().WithName(corev1.ResourceCPU).
				WithTarget(asv2ac.MetricTarget().WithType(autoscalingv2.UtilizationMetricType).WithAverageUtilization(80)))))
}

// service is the API server's Service: the deployment's url.
func (o *objects) service() *corev1ac.ServiceApplyConfiguration {
	sv := withMeta(o, corev1ac.Service(serviceName(o.w.Deployment.ID), o.ns), componentAPI, false)
	return sv.WithSpec(corev1ac.ServiceSpec().WithSelector(o.selector(componentAPI)).
		WithPorts(corev1ac.ServicePort().WithName("http").WithPort(o.d.o.ServerPort).
			WithTargetPort(intstr.FromInt32(o.d.o.ServerPort))))
}

// database is the deployment's PostgreSQL: a StatefulSet with one claim,
// and its (headless) Service.
func (o *objects) database() (*appsv1ac.StatefulSetApplyConfiguration, *corev1ac.ServiceApplyConfiguration) {
	s, dep := &o.spec, o.w.Deployment.ID
	storage := o.dbStorage()
	if o.dbClaim != nil {
		storage = *o.dbClaim // the claim template as created (resizeDatabase grows the claim itself)
	}
	c := corev1ac.Container().WithName("postgres").WithImage(o.d.o.PostgresImage).
		WithResources(requirements(s.DBCPU, s.DBCPULimit, s.DBMemoryMB, s.DBMemoryLimitMB)).
		WithPorts(corev1ac.ContainerPort().WithName("postgres").WithContainerPort(5432)).
		WithEnv(corev1ac.EnvVar().WithName("POSTGRES_PASSWORD").WithValueFrom(corev1ac.EnvVarSource().
			WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(servicesName(dep)).WithKey("POSTGRES_PASSWORD"))),
			corev1ac.EnvVar().WithName("PGDATA").WithValue("/var/lib/postgresql/data/pgdata")).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("data").WithMountPath("/var/lib/postgresql/data")).
		WithReadinessProbe(corev1ac.Probe().WithExec(corev1ac.ExecAction().WithCommand("pg_isready", "-U", "postgres")))
	if s.DBMaxConnections != nil {
		c.WithArgs("-c", "max_connections="+strconv.FormatInt(*s.DBMaxConnections, 10))
	}
	tmpl := withMeta(o, corev1ac.PodTemplateSpec(), componentDB, false).WithSpec(corev1ac.PodSpec().WithContainers(c))
	tmpl.OwnerReferences = nil
	// A StatefulSet's claim templates cannot change: the claim carries only
	// this package's labels, not resource_spec.labels, so that a revision
	// that changes those still applies.
	claimLabels := o.selector(componentDB)
	claimLabels[LabelTenant] = tenantLabel(o.w.Tenant)
	// Without kind, apiVersion and namespace, which the API server does
	// not keep in a claim template (so that Reconcile finds it as applied).
	claim := (&corev1ac.PersistentVolumeClaimApplyConfiguration{}).WithName("data").
		WithLabels(claimLabels).
		WithSpec(corev1ac.PersistentVolumeClaimSpec().WithAccessModes(corev1.ReadWriteOnce).
			WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{
				corev1.ResourceStorage: storage})))
	st := withMeta(o, appsv1ac.StatefulSet(dbName(dep), o.ns), componentDB, false).
		WithSpec(appsv1ac.StatefulSetSpec().WithReplicas(1).WithServiceName(dbName(dep)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(o.selector(componentDB))).
			WithTemplate(tmpl).WithVolumeClaimTemplates(claim).
			// The claim goes with the StatefulSet, hence with the deployment.
			WithPersistentVolumeClaimRetentionPolicy(appsv1ac.StatefulSetPersistentVolumeClaimRetentionPolicy().
				WithWhenDeleted(appsv1.DeletePersistentVolumeClaimRetentionPolicyType).
				WithWhenScaled(appsv1.RetainPersistentVolumeClaimRetentionPolicyType)))
	sv := withMeta(o, corev1ac.Service(dbName(dep), o.ns), componentDB, false).
		WithSpec(corev1ac.ServiceSpec().WithClusterIP(corev1.ClusterIPNone).WithSelector(o.selector(componentDB)).
			WithPorts(corev1ac.ServicePort().WithName("postgres").WithPort(5432)))
	return st, sv
}

// redis is the deployment's Redis: a Deployment and its Service.
func (o *objects) redis() (*appsv1ac.DeploymentApplyConfiguration, *corev1ac.ServiceApplyConfiguration) {
	s, dep := &o.spec, o.w.Deployment.ID
	var limit *int64
	if s.RedisMemoryMB != nil {
		limit = s.RedisMemoryMB
	}
	c := corev1ac.Container().WithName("redis").WithImage(o.d.o.RedisImage).
		WithResources(requirements(nil, nil, s.RedisMemoryMB, limit)).
		WithPorts(corev1ac.ContainerPort().WithName("redis").WithContainerPort(6379)).
		WithReadinessProbe(corev1ac.Probe().WithExec(corev1ac.ExecAction().WithCommand("redis-cli", "ping")))
	if s.RedisMemoryMB != nil {
		c.WithArgs("--maxmemory", strconv.FormatInt(*s.RedisMemoryMB, 10)+"mb")
	}
	tmpl := withMeta(o, corev1ac.PodTemplateSpec(), componentRedis, false).WithSpec(corev1ac.PodSpec().WithContainers(c))
	tmpl.OwnerReferences = nil
	d := withMeta(o, appsv1ac.Deployment(redisName(dep), o.ns), componentRedis, false).
		WithSpec(appsv1ac.DeploymentSpec().WithReplicas(1).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(o.selector(componentRedis))).
			WithTemplate(tmpl))
	sv := withMeta(o, corev1ac.Service(redisName(dep), o.ns), componentRedis, false).
		WithSpec(corev1ac.ServiceSpec().WithSelector(o.selector(componentRedis)).
			WithPorts(corev1ac.ServicePort().WithName("redis").WithPort(6379)))
	return d, sv
}
