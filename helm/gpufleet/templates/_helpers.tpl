{{/* Names and labels. */}}
{{- define "gpufleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpufleet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gpufleet.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gpufleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component (web, worker, beat, migrate). Call with (dict "root" $ "component" "web"). */}}
{{- define "gpufleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpufleet.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gpufleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gpufleet.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gpufleet.image" -}}
{{- if not .Values.image.repository -}}
{{- fail "image.repository is required: the image built from this repository's Dockerfile, with its registry host (e.g. registry.example.com/platform/gpufleet)" -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Where the worker keeps the GitOps working copy (GPUFLEET_VAR_DIR); the repository is a folder in it. */}}
{{- define "gpufleet.varDir" -}}/var/lib/gpufleet{{- end -}}

{{/* ALLOWED_HOSTS: explicit, else the ingress hosts, else the Service's in-cluster names. */}}
{{- define "gpufleet.allowedHosts" -}}
{{- $hosts := .Values.config.allowedHosts -}}
{{- if not $hosts -}}
{{- if and .Values.ingress.enabled .Values.ingress.hosts -}}
{{- $hosts = .Values.ingress.hosts -}}
{{- else -}}
{{- $svc := include "gpufleet.fullname" . -}}
{{- $hosts = list $svc (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) -}}
{{- end -}}
{{- end -}}
{{- join "," $hosts -}}
{{- end -}}

{{- define "gpufleet.csrfTrustedOrigins" -}}
{{- $origins := .Values.config.csrfTrustedOrigins -}}
{{- if and (not $origins) .Values.ingress.enabled -}}
{{- range .Values.ingress.hosts -}}
{{- $origins = append $origins (printf "https://%s" .) -}}
{{- end -}}
{{- end -}}
{{- join "," $origins -}}
{{- end -}}

{{/*
The non-secret environment, one YAML mapping. The ConfigMap holds it; the migrate hook carries the
same mapping inline, because a pre-install hook runs before the release's ConfigMap exists.
*/}}
{{- define "gpufleet.configEnv" -}}
{{- $c := .Values.config -}}
DJANGO_SETTINGS_MODULE: {{ $c.settingsModule | quote }}
ALLOWED_HOSTS: {{ include "gpufleet.allowedHosts" . | quote }}
CSRF_TRUSTED_ORIGINS: {{ include "gpufleet.csrfTrustedOrigins" . | quote }}
OIDC_OP_ISSUER: {{ $c.oidc.issuer | quote }}
OIDC_RP_CLIENT_ID: {{ $c.oidc.clientId | quote }}
OIDC_RP_SCOPES: {{ $c.oidc.scopes | quote }}
OIDC_RP_SIGN_ALGO: {{ $c.oidc.signAlgo | quote }}
GPUFLEET_OIDC_GROUPS_CLAIM: {{ $c.oidc.groupsClaim | quote }}
GPUFLEET_OIDC_USERNAME_CLAIM: {{ $c.oidc.usernameClaim | quote }}
GPUFLEET_BACKEND: {{ $c.backend | quote }}
GPUFLEET_VAR_DIR: {{ include "gpufleet.varDir" . | quote }}
GPUFLEET_GITOPS_REPO: {{ printf "%s/gitops" (include "gpufleet.varDir" .) | quote }}
GPUFLEET_GITOPS_AUTHOR: {{ $c.gitopsAuthor | quote }}
{{- if .Values.gitops.push.enabled }}
GPUFLEET_GITOPS_REMOTE: {{ .Values.gitops.push.url | quote }}
GPUFLEET_GITOPS_REMOTE_BRANCH: {{ .Values.gitops.push.branch | quote }}
GPUFLEET_GITOPS_PUSH: "true"
GPUFLEET_GITOPS_PUSH_STATUS_DIR: "/var/run/gpufleet-push"
{{- end }}
GPUFLEET_REFERENCE_DIR: {{ $c.referenceDir | quote }}
GPUFLEET_KUBERNETES_VERSION: {{ $c.kubernetesVersion | quote }}
GPUFLEET_METRICS_URL: {{ $c.metricsUrl | quote }}
GPUFLEET_OPENBAO_ADDR: {{ $c.openbaoAddr | quote }}
LOG_LEVEL: {{ $c.logLevel | quote }}
LOG_FORMAT: "json"
# gunicorn's and Celery's processes write their metric samples here; a scrape merges them (the emptyDir /tmp).
PROMETHEUS_MULTIPROC_DIR: "/tmp"
PYTHONDONTWRITEBYTECODE: "1"
PYTHONUNBUFFERED: "1"
HOME: "/tmp"
{{- range $name, $value := $c.extraEnv }}
{{ $name }}: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{/* Secret environment: references into the existing Secret, never values. */}}
{{- define "gpufleet.secretEnv" -}}
{{- $secret := .Values.secrets.existingSecret -}}
{{- range $name, $key := .Values.secrets.keys }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $key }}
{{- end }}
{{- range $name, $key := .Values.secrets.optionalKeys }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $key }}
      optional: true
{{- end }}
{{- end -}}

{{/* envFrom + env of the long-running containers. */}}
{{- define "gpufleet.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "gpufleet.fullname" . }}
env:
{{- include "gpufleet.secretEnv" . | trim | nindent 2 }}
{{- end -}}

{{/* Pod-level settings shared by every pod. */}}
{{- define "gpufleet.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{/* Roll pods when the non-secret settings change, or when the operator bumps secrets.version after a
rotation (the chart never reads the Secret, so it cannot notice the new values by itself). */}}
{{- define "gpufleet.configChecksum" -}}
checksum/config: {{ include "gpufleet.configEnv" . | sha256sum }}
checksum/secret: {{ printf "%s/%s/%s" .Values.secrets.existingSecret .Values.secrets.version (toJson .Values.secrets.keys) | sha256sum }}
{{- end -}}

{{/* Scheduling knobs of one component: pass the component's values. */}}
{{- define "gpufleet.placement" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* topologySpreadConstraints of one component: pass (dict "root" $ "component" "web" "values" $web
"default" bool); each constraint without a labelSelector gets the component's pod labels. */}}
{{- define "gpufleet.topologySpread" -}}
{{- $constraints := .values.topologySpreadConstraints | default list -}}
{{- if and (not $constraints) .default -}}
{{- $constraints = list (dict "maxSkew" 1 "topologyKey" "kubernetes.io/hostname" "whenUnsatisfiable" "ScheduleAnyway") -}}
{{- end -}}
{{- if $constraints }}
topologySpreadConstraints:
{{- range $constraints }}
{{- $c := deepCopy . -}}
{{- if not $c.labelSelector -}}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "gpufleet.selectorLabels" (dict "root" $.root "component" $.component) | fromYaml)) -}}
{{- end }}
- {{- toYaml $c | nindent 2 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* A writable /tmp (gunicorn's heartbeat files, beat's schedule) under a read-only root filesystem. */}}
{{- define "gpufleet.tmpVolume" -}}
- name: tmp
  emptyDir:
    medium: Memory
    sizeLimit: 64Mi
{{- end -}}
{{- define "gpufleet.tmpMount" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* Chart-level checks that a schema cannot express. */}}
{{- define "gpufleet.validate" -}}
{{- if and (eq .Values.config.backend "gitops") (gt (int .Values.worker.replicas) 1) -}}
{{- fail "worker.replicas must be 1 with the gitops backend: the worker is the GitOps repository's single writer (raise worker.concurrency instead)" -}}
{{- end -}}
{{- $push := .Values.gitops.push -}}
{{- if and $push.enabled (not $push.url) -}}
{{- fail "gitops.push.url is required when gitops.push.enabled is true" -}}
{{- end -}}
{{- if and $push.enabled (eq (include "gpufleet.pushScheme" .) "ssh") (not $push.sshSecret) -}}
{{- fail "gitops.push.sshSecret is required for an ssh gitops.push.url (a Secret with `identity` and `known_hosts`): without it every push fails" -}}
{{- end -}}
{{- if and $push.enabled (eq (include "gpufleet.pushScheme" .) "https") (not $push.httpsSecret) -}}
{{- fail "gitops.push.httpsSecret is required for an https gitops.push.url (a Secret with `username` and `password`): without it every push fails" -}}
{{- end -}}
{{- if and $push.enabled (eq .Values.config.backend "kubernetes") -}}
{{- fail "gitops.push.enabled needs config.backend=gitops (the kubernetes backend writes no repository)" -}}
{{- end -}}
{{- if and .Values.rbac.create (not .Values.serviceAccount.create) -}}
{{- fail "rbac.create needs serviceAccount.create (the ClusterRole is bound to the chart's service account)" -}}
{{- end -}}
{{- end -}}

{{/* The app containers' mounts and the pods' volumes: /tmp plus the operator's extraVolumes (a CA bundle
for GPUFLEET_VCLUSTER_CA_BUNDLE, a kubeconfig for GPUFLEET_KUBECONFIG, ...). */}}
{{- define "gpufleet.appMounts" -}}
{{ include "gpufleet.tmpMount" . }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}
{{- define "gpufleet.volumes" -}}
{{ include "gpufleet.tmpVolume" . }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The Host the web probes and `helm test` send: the first allowed host, as a concrete name (Django's
".example.com" pattern matches "example.com"; "*" matches anything). */}}
{{- define "gpufleet.probeHost" -}}
{{- $host := first (splitList "," (include "gpufleet.allowedHosts" .)) -}}
{{- if eq $host "*" -}}localhost{{- else -}}{{- trimPrefix "." $host -}}{{- end -}}
{{- end -}}

{{/* "ssh" or "https": how gitops.push.url is reached (the schema allows nothing else). */}}
{{- define "gpufleet.pushScheme" -}}
{{- if hasPrefix "https://" .Values.gitops.push.url -}}https{{- else -}}ssh{{- end -}}
{{- end -}}

{{/* Credentials for the GitOps remote, for the worker (initialises a lost working copy from it) and the
push sidecar: an SSH identity from a mounted Secret, or an https token through a credential helper that
reads the environment (nothing on disk). */}}
{{- define "gpufleet.gitRemoteEnv" -}}
{{- $push := .Values.gitops.push -}}
{{- if $push.enabled -}}
{{- if eq (include "gpufleet.pushScheme" .) "ssh" }}
- name: GIT_SSH_COMMAND
  value: ssh -i /etc/gpufleet/git-ssh/identity -o IdentitiesOnly=yes -o UserKnownHostsFile=/etc/gpufleet/git-ssh/known_hosts -o StrictHostKeyChecking=yes
{{- else }}
- name: GPUFLEET_GIT_USERNAME
  valueFrom:
    secretKeyRef: {name: {{ $push.httpsSecret }}, key: username}
- name: GPUFLEET_GIT_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ $push.httpsSecret }}, key: password}
- name: GIT_CONFIG_COUNT
  value: "1"
- name: GIT_CONFIG_KEY_0
  value: credential.helper
- name: GIT_CONFIG_VALUE_0
  value: '!f() { echo "username=${GPUFLEET_GIT_USERNAME}"; echo "password=${GPUFLEET_GIT_PASSWORD}"; }; f'
{{- end }}
{{- end }}
{{- end -}}
{{- define "gpufleet.gitRemoteMount" -}}
{{- if .Values.gitops.push.enabled }}
- name: push-status
  mountPath: /var/run/gpufleet-push
{{- end }}
{{- if and .Values.gitops.push.enabled .Values.gitops.push.sshSecret }}
- name: git-ssh
  mountPath: /etc/gpufleet/git-ssh
  readOnly: true
{{- end }}
{{- end -}}
