// Package deployk8s is a controlplane.Deployer that runs revisions on a
// Kubernetes cluster, through the API every Kubernetes user trusts:
// k8s.io/client-go's typed clients and server-side apply with one field
// manager (Options.FieldManager). No kubectl, no YAML rendered as text:
// every object is an apply configuration built from the revision.
//
//	cfg, _ := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
//		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
//		&clientcmd.ConfigOverrides{CurrentContext: "prod-eu"}).ClientConfig()
//	cli, _ := kubernetes.NewForConfig(cfg)
//	d, _ := deployk8s.New(&deployk8s.Options{Client: cli, Cluster: "prod-eu", State: cp})
//	d.Start(ctx)      // reconcile now and every minute
//	go cp.Run(ctx, d) // or behind a deployroute.Router, one per cluster
//
// One Deployer drives one cluster; package deployroute sends each
// deployment to the cluster its listener names (compute_type k8s,
// compute_id a kubeconfig context). A deployment with a listener runs in
// controlplane.K8sNamespace of it (listener_config.k8s_namespace, else the
// listener's first namespace, else "default"); one without, in
// Options.Namespace.
//
// # What a revision becomes
//
// Every object is labelled with LabelInstance, LabelTenant,
// LabelDeployment, LabelComponent and (per revision) LabelRevision, plus
// resource_spec.labels and annotations, and owned (owner references) by
// the deployment's ConfigMap "dp-<deployment id>", so that deleting it
// cascades:
//
//   - a Secret "dp-<id>-<revision id>" with the revision's secrets, read
//     by the containers as environment variables (envFrom): the values
//     appear in no pod spec, annotation or log;
//   - the API server's Deployment "dp-<id>-api": image_uri, min_scale
//     replicas (at least 1; with an autoscaler, the replicas it set when
//     within its range, so that a revision does not undo its scaling),
//     requests and limits from cpu, cpu_limit,
//     memory_mb and memory_limit_mb after controlplane.ResourceSpec.WithDefaults
//     (the one function that applies the seed's defaults, shared with
//     deploydocker), service_account_name, image_pull_secrets, volumes,
//     volume_mounts, init_containers, sidecars (native sidecars: init
//     containers with restartPolicy Always), readiness on GET /ok at port
//     8000 (Options.ReadyPath, ServerPort), $PORT, and rolling updates with
//     maxUnavailable 0: the old ReplicaSet goes to zero only as new pods
//     are available (ready for Options.MinReady, so that a container that
//     fails right after it starts fails the revision);
//   - the queue worker's Deployment "dp-<id>-queue", sized by the queue_*
//     fields and their defaults;
//   - HorizontalPodAutoscalers (autoscaling/v2, on CPU) from min_scale to
//     max_scale, and from queue_min_scale to queue_max_scale, when the
//     maximum is above the minimum;
//   - with Options.PullSecrets, when the image is in the server's own
//     registry (built-in, or external and trusting the server's realm): a
//     kubernetes.io/dockerconfigjson Secret "dp-<id>-pull" holding a
//     pull-only token of the deployment, listed in the pods'
//     imagePullSecrets before the resource_spec's own, and refreshed by
//     Reconcile before the token expires (RefreshPullSecrets); it is
//     deleted when a later revision's image is elsewhere;
//   - a Service "dp-<id>": the deployment's url is
//     http://dp-<id>.<namespace>.svc.cluster.local:8000 unless custom_url
//     is set;
//   - the deployment's database and Redis (unless Options.NoServices): a
//     PostgreSQL StatefulSet with one claim of db_storage_gi (deleted with
//     it; the claim template keeps the size it was created with, and a
//     later db_storage_gi resizes the claim itself: see below), db_cpu and db_memory_mb and their limits, db_max_connections; a
//     Redis Deployment limited to redis_memory_mb; their Services, and a
//     Secret "dp-<id>-services" with the database's password and the
//     DATABASE_URI and REDIS_URI the API server and queue get;
//   - a Secret "dp-<id>-active", written before a revision is reported
//     DEPLOYED: the record of the active revision (its image, resource
//     spec and secrets), from which its objects are put back.
//
// # Status from the cluster
//
// After applying, Deploy watches the cluster (every Options.PollInterval):
// the revision is DEPLOYED once the API server's and queue's rollouts of
// this revision complete (observed generation; updated, ready and
// available replicas all the desired count, at least min_scale, no old
// replica left) and the database and Redis are ready; until then the deployment stays
// AWAITING_DATABASE (the first revision) or keeps its active revision. It
// ends DEPLOY_FAILED, with a status_message taken from the cluster, when
// the API server refuses an object (an invalid volume, a missing
// namespace: "The cluster refused ...: <the API server's message>"), when
// a container of the revision's pods fails or cannot start (read from the
// pods' container states, not only the Deployment's conditions: an exit
// code, ImagePullBackOff, CrashLoopBackOff ...), or when the Deployment's
// progressDeadlineSeconds (Options.ProgressDeadline) passes. A failed
// revision after an active one puts back every object of the active one,
// applied again from its record (Deployments, autoscalers, the database,
// Redis, Services, Secrets; an autoscaler the active revision lacks is
// deleted); its pods never stopped serving, maxUnavailable being 0. (A
// deployment without a record gets the active revision's pod templates
// back, from its newest ReplicaSets, as kubectl rollout undo does.)
//
// A db_storage_gi other than the database claim's size resizes the claim
// (volume expansion). When the cluster refuses (a shrink, a StorageClass
// without allowVolumeExpansion) the revision fails saying so and the
// database keeps its size; the refused size is recorded on the claim
// (AnnotationStorageRefused), and a later revision asking for that same
// size deploys with the claim as it is, its deploy log saying so: the
// deployment's stored resource_spec keeps the value, and it must not fail
// every revision after.
//
// # Guarantees
//
//   - DEPLOYED means min_scale replicas of the revision are available.
//   - An API server that does not answer (connection refused or reset,
//     timeouts, 429, 500, 502, 503, 504) never fails a revision: every
//     step is retried with backoff (250 ms doubling to 10 s), the deploy
//     log saying when the cluster stops and starts answering (the cause
//     goes to the Logger). After Options.ProgressDeadline without an
//     answer Deploy returns with the revision where it is, and the control
//     plane calls it again later.
//   - A failed revision leaves the cluster as the active revision had it.
//   - Reconcile repairs drift: an object of the active revision changed
//     or deleted by hand is applied again (see Reconcile).
//   - Ready (for /readyz and the cluster_up metric) logs once each time
//     the cluster stops or starts answering; a Router does not make the
//     server unready for a cluster (controlplane.ClusterHealthReporter).
//
// Each step, the rollout's progress and the cluster's Events about the
// deployment's objects (one Event informer per namespace in use) go to the
// revision's deploy log.
//
// # Crash safety
//
// Apply is declarative: a Deploy resumed after a restart applies the same
// objects again and finds the rollout where it is, so nothing is
// duplicated. Reconcile (at start, and every Options.ReconcileEvery with
// Start) lists this instance's owner ConfigMaps in every namespace and
// deletes those of deployments the store no longer has, deletes the
// Secrets of revisions neither active nor in flight, puts the active
// revision back where a crash left a failed one applied, and, when no
// revision is in flight, applies again the active revision's objects
// whose fields this package manages were changed or that were deleted (one
// list per kind for the whole cluster finds them). An owner ConfigMap
// deleted by hand takes its objects with it, and the record deleted by
// hand leaves nothing to repair from: the next revision applies them.
//
// Teardown deletes the owner in the foreground and returns only once no
// object labelled for the deployment is left in any namespace (claims
// included); the control plane removes the records after that.
//
// # Embedding
//
// An embedder needs, per cluster, a kubernetes.Interface (client-go, from
// a kubeconfig context or rest.InClusterConfig), a name for it (what
// listeners put in compute_id) and the control plane as State:
//
//   - New builds the Deployer without contacting the cluster; Ready asks
//     the API server (a controlplane.ReadinessChecker, for /readyz);
//   - Start reconciles once and then every Options.ReconcileEvery until
//     Close; call it before the control plane's Run. An embedder that
//     runs several control-plane replicas over one store may call it on
//     each: Apply and Reconcile are idempotent;
//   - Deploy and Teardown are called by the control plane, through a
//     deployroute.Router when there is more than one cluster (or a Docker
//     engine besides); the Router makes sure a deployment's revisions and
//     its Teardown always reach the same Deployer;
//   - Options.Instance (default "deployplane") marks this installation's
//     objects: two installations sharing a cluster need different ones,
//     replicas of one the same. Options.NoServices leaves out the
//     per-deployment PostgreSQL and Redis (for an embedder that gives
//     DATABASE_URI and REDIS_URI as secrets of its own).
//
// The client needs, in the namespaces it deploys to, create, get, list,
// watch, patch and delete on ConfigMaps, Secrets, Services, Pods,
// PersistentVolumeClaims (patch: the database's resize), Events, Deployments, ReplicaSets, StatefulSets
// and HorizontalPodAutoscalers; Reconcile and Teardown also list those
// cluster-wide (by label), so the simplest grant is a ClusterRole with
// those verbs on those resources.
//
// # Tests
//
// The tests run against real Kubernetes control planes (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, with kwok's
// fake nodes in place of kubelets) that .ci/run builds from the nested
// module .ci/kube and starts on loopback (source .ci/kube.sh;
// kube_start); DEPLOYPLANE_TEST_KUBECONFIG names a kubeconfig with the
// contexts kube-a and kube-b. Without it they skip and say so. Every wait
// is for a condition, with a deadline of minutes that only a hang reaches.
package deployk8s
