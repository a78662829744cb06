// Package deployk8s is a controlplane.Deployer that runs revisions on a
// Kubernetes cluster through k8s.io/client-go's typed clients and
// server-side apply with one field manager (Options.FieldManager).
//
//	cfg, _ := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
//		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
//		&clientcmd.ConfigOverrides{CurrentContext: "prod-eu"}).ClientConfig()
//	cli, _ := kubernetes.NewForConfig(cfg)
//	d, _ := deployk8s.New(&deployk8s.Options{Client: cli, Cluster: "prod-eu", State: cp})
//	d.Start(ctx)      // reconcile now and every Options.ReconcileEvery
//	go cp.Run(ctx, d) // or behind a deployroute.Router, one per cluster
//
// One Deployer drives one cluster; package deployroute sends each
// deployment to the cluster its listener names (compute_type k8s,
// compute_id a kubeconfig context). A deployment with a listener runs in
// controlplane.K8sNamespace of it; one without, in Options.Namespace.
//
// A revision becomes, all labelled (LabelInstance, LabelTenant,
// LabelDeployment, LabelComponent, LabelRevision) and owned by the
// deployment's ConfigMap "dp-<id>" so that deleting it cascades: a Secret
// with the revision's secrets (read through envFrom, never in a pod spec);
// the Deployments "dp-<id>-api" and "dp-<id>-queue" sized from the
// resource_spec after controlplane.ResourceSpec.WithDefaults, with
// readiness on Options.ReadyPath and rolling updates with maxUnavailable
// 0; HorizontalPodAutoscalers when a maximum scale is above its minimum
// (not for a minimum of 0: see below); a
// PodDisruptionBudget "dp-<id>-api" (minAvailable 1) while min_scale is 2
// or more; a Service "dp-<id>" (url
// http://dp-<id>.<namespace>.svc.cluster.local:8000 unless custom_url is
// set); with Options.Expose, an Ingress or a Gateway API HTTPRoute
// "dp-<id>" whose host and path come from templates, the url then being
// that external address (Deployer.Address); unless Options.NoServices, a
// PostgreSQL StatefulSet and a Redis Deployment with their Services and
// credentials; with Options.PullSecrets, a pull Secret for images of the
// server's own registry; and a record of the active revision
// ("dp-<id>-active").
//
// Guarantees:
//
//   - DEPLOYED means min_scale replicas of the revision are available and
//     the database and Redis are ready. min_scale 0 (and
//     queue_min_scale 0) means an external scaler (KEDA-style, the
//     operator's) scales the Deployment to zero and back: a revision
//     rolls out one replica, no HorizontalPodAutoscaler is made, and the
//     replicas are the scaler's from then on (Reconcile leaves them).
//     The deployment stays READY at zero. A container that fails or cannot
//     start, an object the API server refuses, or
//     Options.ProgressDeadline passing ends the revision DEPLOY_FAILED
//     with a status_message taken from the cluster.
//   - A failed revision leaves the cluster as the active revision had it:
//     its objects are applied again from its record, and its pods never
//     stopped serving. So does a revision interrupted or superseded while
//     it rolls out (its Deploy stopped with controlplane.ErrRevisionEnded).
//   - An API server that does not answer never fails a revision: each
//     step is retried with backoff, and after Options.ProgressDeadline
//     Deploy returns with the revision where it is, for the control plane
//     to resume.
//   - A db_storage_gi the cluster refuses to resize fails that revision
//     and keeps the database's size; a later revision asking for the same
//     size deploys with the claim as it is (AnnotationStorageRefused).
//   - Reconcile (at Start, and every Options.ReconcileEvery over the
//     caches: ReconcileCached) removes the
//     objects of deleted deployments and stale revisions and applies again
//     active objects changed or deleted by hand. It also gives each
//     deployment the Ingress or HTTPRoute that Options.Expose asks for now,
//     removing it when exposure is turned off (the url a deployment
//     reports changes with its next revision). Deploy and Reconcile are
//     idempotent, so several control-plane replicas may each call Start.
//   - Teardown returns only once no object labelled for the deployment is
//     left in any namespace it works in.
//
// The Deployer watches what it reads again and again: a shared informer
// per kind (ConfigMaps, Secrets, Services, Deployments, StatefulSets,
// Pods, HorizontalPodAutoscalers, PodDisruptionBudgets, Ingresses) and
// per namespace scope (every namespace, or each of Options.Namespaces),
// selecting this instance's objects, started by Start or the first
// rollout and stopped by Close (watch.go). A rollout waits on them, woken
// when an object of its deployment changes, and ReconcileCached reads
// them: a cluster whose deployments do not change is asked for the
// watches' renewals and the HTTPRoutes' list, however many deployments it
// runs. Where they cannot be trusted (not synced yet, a watch refused,
// after Close) the Deployer reads the API server instead, a rollout every
// Options.PollInterval.
//
// Each step, the rollout's progress and the cluster's Events about the
// deployment's objects go to the revision's deploy log. Ready asks the API
// server (a controlplane.ReadinessChecker). Options.Instance (default
// "deployplane") marks this installation's objects: two installations
// sharing a cluster need different ones, replicas of one the same.
//
// The client needs, in the namespaces it deploys to: list, watch, create,
// patch and delete on ConfigMaps; get, list, watch, create, patch and
// delete on Secrets; list, watch, create and patch on Services; get,
// list, watch, create and patch on Deployments and StatefulSets; list,
// watch, create, patch and delete on HorizontalPodAutoscalers and
// PodDisruptionBudgets; get, list and patch on PersistentVolumeClaims;
// list and watch on Pods and Events; list on ReplicaSets; list, watch
// and delete on Ingresses; list and delete on HTTPRoutes; create and
// patch on the kind Options.Expose asks for (server-side apply is a
// patch, and a create when the object is new). It lists and watches by
// label in every namespace (a ClusterRole), or in Options.Namespaces
// only (a Role in each). A grant without PodDisruptionBudgets, Ingresses
// or HTTPRoutes reads as none of them, until a revision needs one; one
// without watch, as the caches not to be trusted. The Helm chart (deploy/helm/deployplane)
// grants exactly this, and its test proves it. The tests need
// DEPLOYPLANE_TEST_KUBECONFIG (contexts kube-a and kube-b) and skip
// without it. Design notes: docs/design-notes.md, "deployk8s".
package deployk8s
