{{/* The chart's name. */}}
{{- define "deployplane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the prefix of every object's name. */}}
{{- define "deployplane.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The labels that select the release's pods. */}}
{{- define "deployplane.selectorLabels" -}}
app.kubernetes.io/name: {{ include "deployplane.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ include "deployplane.component" . }}
{{- end }}

{{/* The labels of every object. */}}
{{- define "deployplane.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "deployplane.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* control-plane or agent, after checking the role. */}}
{{- define "deployplane.component" -}}
{{- if eq .Values.role "controlPlane" }}control-plane
{{- else if eq .Values.role "agent" }}agent
{{- else }}{{ fail (printf "role must be controlPlane or agent, not %q" .Values.role) }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the pods run as. */}}
{{- define "deployplane.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "deployplane.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "deployplane.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* "true" when the release deploys into this cluster: an agent, or a
control plane driving its own cluster. */}}
{{- define "deployplane.deploys" -}}
{{- if or (eq .Values.role "agent") .Values.controlPlane.kubernetes.enabled }}true{{ end }}
{{- end }}

{{/* The namespaces the deployer works in, checked; empty with
rbac.allNamespaces. */}}
{{- define "deployplane.namespaces" -}}
{{- if not .Values.rbac.allNamespaces }}
{{- if not .Values.rbac.namespaces }}
{{- fail "rbac.namespaces: name the namespaces deployments run in (a Role in each), or set rbac.allNamespaces=true (a ClusterRole)" }}
{{- end }}
{{- range .Values.rbac.namespaces }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" .) }}
{{- fail (printf "rbac.namespaces: %q is no namespace name" .) }}
{{- end }}
{{- end }}
{{- join "," (uniq .Values.rbac.namespaces) }}
{{- end }}
{{- end }}

{{/* The deployer's flags: namespaces, instance, exposure. */}}
{{- define "deployplane.deployerArgs" -}}
{{- $ns := include "deployplane.namespaces" . }}
{{- if $ns }}
- -k8s-namespaces
- {{ $ns | quote }}
{{- end }}
{{- with .Values.kubernetes.instance }}
- {{ if eq $.Values.role "agent" }}-instance{{ else }}-k8s-instance{{ end }}
- {{ . | quote }}
{{- else }}
{{- if eq .Values.role "controlPlane" }}
- -k8s-instance
- {{ include "deployplane.fullname" . | quote }}
{{- end }}
{{- end }}
{{- $x := .Values.kubernetes.expose }}
{{- if not (has $x.kind (list "none" "ingress" "httproute")) }}
{{- fail (printf "kubernetes.expose.kind must be none, ingress or httproute, not %q" $x.kind) }}
{{- end }}
{{- if ne $x.kind "none" }}
- -k8s-expose
- {{ $x.kind }}
- -k8s-host-template
- {{ required "kubernetes.expose.hostTemplate is required with an exposure" $x.hostTemplate | quote }}
{{- with $x.pathTemplate }}
- -k8s-path-template
- {{ . | quote }}
{{- end }}
{{- with $x.ingressClass }}
- -k8s-ingress-class
- {{ . | quote }}
{{- end }}
{{- with $x.gateway }}
- -k8s-gateway
- {{ . | quote }}
{{- end }}
{{- with $x.gatewaySection }}
- -k8s-gateway-section
- {{ . | quote }}
{{- end }}
{{- with $x.tlsIssuer }}
- -k8s-tls-issuer
- {{ . | quote }}
{{- end }}
{{- if $x.https }}
- -k8s-https
{{- end }}
{{- range $k, $v := $x.annotations }}
- -k8s-expose-annotation
- {{ printf "%s=%s" $k $v | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* The rules of the deployer's Role or ClusterRole: exactly the verbs
package deployk8s uses, on exactly the kinds it manages (README.md,
"Permissions"). Server-side apply is a patch, and a create when the object
is new. */}}
{{- define "deployplane.rules" -}}
- apiGroups: [""]
  resources: [configmaps]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [list, watch, create, patch]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, patch]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [list, watch]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, list, watch, create, patch]
- apiGroups: [apps]
  resources: [replicasets]
  verbs: [list]
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [ingresses]
  verbs: [list, watch, delete{{ if eq .Values.kubernetes.expose.kind "ingress" }}, create, patch{{ end }}]
- apiGroups: [gateway.networking.k8s.io]
  resources: [httproutes]
  verbs: [list, delete{{ if eq .Values.kubernetes.expose.kind "httproute" }}, create, patch{{ end }}]
{{- end }}

{{/* A Secret's key reference (valueFrom.secretKeyRef) for list (root,
existingSecret, existingSecretKey, value, key): the existing Secret's key,
or key of the chart's Secret when value is set; empty with neither. */}}
{{- define "deployplane.secretRef" -}}
{{- $ := index . 0 }}{{ $existing := index . 1 }}{{ $existingKey := index . 2 }}{{ $value := index . 3 }}{{ $key := index . 4 }}
{{- if $existing -}}
secretKeyRef: {name: {{ $existing | quote }}, key: {{ $existingKey | quote }}}
{{- else if $value -}}
secretKeyRef: {name: {{ include "deployplane.fullname" $ | quote }}, key: {{ $key | quote }}}
{{- end }}
{{- end }}

{{/* The control plane's environment: the credentials from Secrets. */}}
{{- define "deployplane.controlPlaneEnv" -}}
{{- $cp := .Values.controlPlane }}
{{- with include "deployplane.secretRef" (list . $cp.postgres.existingSecret $cp.postgres.existingSecretKey $cp.postgres.dsn "dsn") }}
- name: DEPLOYPLANE_DB
  valueFrom: {{ . | nindent 4 }}
{{- end }}
{{- with include "deployplane.secretRef" (list . $cp.secretKey.existingSecret $cp.secretKey.existingSecretKey $cp.secretKey.value "secret-key") }}
- name: DEPLOYPLANE_SECRET_KEY
  valueFrom: {{ . | nindent 4 }}
{{- end }}
{{- with $cp.metrics.keySecret }}
- name: DEPLOYPLANE_METRICS_KEY
  valueFrom:
    secretKeyRef: {name: {{ . | quote }}, key: {{ $cp.metrics.keySecretKey | quote }}}
{{- end }}
{{- with .Values.extraEnv }}
{{- toYaml . | nindent 0 }}
{{- end }}
{{- end }}
