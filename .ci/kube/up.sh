#!/usr/bin/env bash
# Starts a Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, and kwok managing fake nodes (pods reach Running and Ready without containers).
# Usage: up.sh KUBE_BINARY DIR PORT_BASE [NODES]   (needs openssl and curl)
#   DIR gets the certificates, logs, pid files and `kubeconfig`; PORT_BASE, PORT_BASE+1 (etcd)
#   and PORT_BASE+2 (apiserver) must be free. Stop it with down.sh DIR. CONTEXT names the
#   kubeconfig's cluster, user and context (default: local), so that two clusters' files merge
#   (KUBECONFIG=a/kubeconfig:b/kubeconfig kubectl config view --flatten).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
KUBE=$(realpath "$1"); D=$(realpath -m "$2"); P=$3; NODES=${4:-2}
rm -rf "$D/etcd"; mkdir -p "$D/pki" "$D/etcd"; cd "$D/pki"   # a fresh cluster every time
ossl(){ openssl "$@" 2>/dev/null; }
ossl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 7 -subj "/CN=test-ca"
ossl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver"
echo "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc" > san.ext
ossl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 7 -extfile san.ext
ossl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/CN=admin/O=system:masters"
ossl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 7
ossl genrsa -out sa.key 2048; ossl rsa -in sa.key -pubout -out sa.pub
cd "$D"
run(){ name=$1; shift; "$KUBE" "$@" > "$name.log" 2>&1 & echo $! > "$name.pid"; }
run etcd etcd --data-dir etcd --unsafe-no-fsync \
  --listen-client-urls http://127.0.0.1:$((P+1)) --advertise-client-urls http://127.0.0.1:$((P+1)) \
  --listen-peer-urls http://127.0.0.1:$P --initial-advertise-peer-urls http://127.0.0.1:$P \
  --initial-cluster default=http://127.0.0.1:$P
# The service range is bookkeeping only: nothing here routes to it, and no traffic is sent there.
run apiserver kube-apiserver --etcd-servers http://127.0.0.1:$((P+1)) \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port $((P+2)) --endpoint-reconciler-type none \
  --tls-cert-file pki/apiserver.crt --tls-private-key-file pki/apiserver.key --client-ca-file pki/ca.crt \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file pki/sa.pub \
  --service-account-signing-key-file pki/sa.key --service-cluster-ip-range 10.96.0.0/16 \
  --authorization-mode RBAC --allow-privileged --shutdown-delay-duration 0s
C=${CONTEXT:-local}
cat > kubeconfig <<KC
apiVersion: v1
kind: Config
clusters: [{name: $C, cluster: {server: "https://127.0.0.1:$((P+2))", certificate-authority: "$D/pki/ca.crt"}}]
users: [{name: $C-admin, user: {client-certificate: "$D/pki/admin.crt", client-key: "$D/pki/admin.key"}}]
contexts: [{name: $C, context: {cluster: $C, user: $C-admin}}]
current-context: $C
KC
# Up to 3 minutes: a loaded 2-core machine (a parallel module download, a cold page cache)
# has taken over one. A process that exited is not waited for.
ready=""; why="not ready after 180 s"; for i in $(seq 720); do
  if curl -sf --cacert pki/ca.crt --cert pki/admin.crt --key pki/admin.key https://127.0.0.1:$((P+2))/readyz >/dev/null; then ready=1; break; fi
  kill -0 "$(cat etcd.pid)" 2>/dev/null || { why="etcd exited"; break; }
  kill -0 "$(cat apiserver.pid)" 2>/dev/null || { why="kube-apiserver exited"; break; }
  sleep 0.25; done
if [ -z "$ready" ]; then
  { echo "up.sh: kube-apiserver on 127.0.0.1:$((P+2)): $why; the last lines of its log and etcd's:"
    tail -20 apiserver.log; tail -10 etcd.log; } >&2
  exit 1
fi
# --enable-hostpath-provisioner: the controller manager's own (test-only) provisioner gives every
# claim of the default StorageClass below a fresh hostPath volume, and deletes it with the claim
# (its deleter removes only paths under /tmp/, which it never created: nothing mounts them).
# --kube-api-qps/--kube-api-burst: each controller's client is limited to 20 requests a second
# by default, which alone makes 1,000 deployments (2,000 pods and more, their events and status updates)
# take many minutes on the ReplicaSet controller; clusters of that size raise it, and so does
# this one, so that deployk8s's scale test measures deployplane rather than that limit.
run controller-manager kube-controller-manager --kubeconfig kubeconfig --bind-address 127.0.0.1 --secure-port 0 \
  --kube-api-qps 100 --kube-api-burst 200 \
  --leader-elect=false --service-account-private-key-file pki/sa.key --root-ca-file pki/ca.crt \
  --enable-hostpath-provisioner \
  --cluster-signing-cert-file pki/ca.crt --cluster-signing-key-file pki/ca.key --controllers '*'
run scheduler kube-scheduler --kubeconfig kubeconfig --bind-address 127.0.0.1 --secure-port 0 --leader-elect=false
# kwok's own stage definitions, from its module: nodes become Ready, pods Running and Ready,
# deleted pods go away; a pod labelled pod-container-running-failed.stage.kwok.x-k8s.io=true
# has its containers fail (for failure tests).
S=$(cd "$HERE" && go mod download -json sigs.k8s.io/kwok@v0.8.0 | sed -n 's/.*"Dir": "\(.*\)",/\1/p')/kustomize/stage
for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease pod/fast/pod-ready \
  pod/fast/pod-complete pod/fast/pod-delete pod/chaos/pod-container-running-failed; do cat "$S/$f.yaml"; echo "---"; done > stages.yaml
# --node-lease-duration-seconds: kwok (unlike kwokctl, which passes 40) defaults it to 0 and then
# holds no Lease in kube-node-lease, while the heartbeat-with-lease stage refreshes the nodes'
# status only every 10 to 20 minutes. The node lifecycle controller then saw no heartbeat for its
# grace period (50 s), marked every node Unknown, tainted it and set its pods NotReady, and
# node-initialize made it Ready again a moment later: nodes flapped about once a minute and
# rollouts stalled. With leases, kwok renews each node's every 10 s, as a kubelet does.
run kwok kwok --kubeconfig kubeconfig -c stages.yaml --manage-all-nodes=false \
  --node-lease-duration-seconds 40 \
  --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
  --node-ip 127.0.0.1 --node-port 0 --server-address 127.0.0.1:0
# Fake nodes, and the default StorageClass for claims (a database's StatefulSet). A fixed pool of
# PersistentVolumes would not do: a claim's deletion leaves its volume Released, never bound again,
# so a cluster that ran the tests a few times had none left and databases waited forever. Created
# with curl (no kubectl: Debian does not package it); a Node created with its status keeps it.
api(){ curl -sf --cacert pki/ca.crt --cert pki/admin.crt --key pki/admin.key \
  -H 'Content-Type: application/json' -X POST --data-binary @- "https://127.0.0.1:$((P+2))$1" >/dev/null; }
for n in $(seq 0 $((NODES-1))); do api /api/v1/nodes <<NODE; done
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "fake-node-$n",
   "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
   "labels": {"kubernetes.io/hostname": "fake-node-$n", "kubernetes.io/os": "linux", "type": "kwok"}},
 "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
   "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}}}
NODE
api /apis/storage.k8s.io/v1/storageclasses <<SC
{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
 "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
 "provisioner": "kubernetes.io/host-path", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}
SC
echo "$D/kubeconfig"
