{{/* Names, labels and shared fragments of the wagate chart. */}}

{{- define "wagate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "wagate.fullname" -}}
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

{{- define "wagate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "wagate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: include "wagate.selectorLabels" (list . "api") */}}
{{- define "wagate.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "wagate.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "wagate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "wagate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "wagate.secretName" -}}
{{- default (printf "%s-secrets" (include "wagate.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "wagate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "wagate.peersService" -}}
{{- printf "%s-peers" (include "wagate.fullname" .) -}}
{{- end -}}

{{/* An environment value as a string: integers stay integers (values arrive as float64). */}}
{{- define "wagate.envValue" -}}
{{- if or (kindIs "float64" .) (kindIs "int64" .) (kindIs "int" .) -}}
{{- printf "%d" (int64 .) -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/* RAFT_VOTERS: the configured ids, or the first raftVoterCount pod names. */}}
{{- define "wagate.raftVoters" -}}
{{- if .Values.cluster.raftVoters -}}
{{- join "," .Values.cluster.raftVoters -}}
{{- else -}}
{{- $voters := list -}}
{{- range $i := until (int .Values.cluster.raftVoterCount) -}}
{{- $voters = append $voters (printf "%s-api-%d" (include "wagate.fullname" $) $i) -}}
{{- end -}}
{{- join "," $voters -}}
{{- end -}}
{{- end -}}

{{/* Refuses values that cannot make a working release. */}}
{{- define "wagate.validate" -}}
{{- if and (not .Values.cluster.enabled) (gt (int .Values.api.replicas) 1) -}}
{{- fail "api.replicas > 1 needs cluster.enabled=true (several nodes share PostgreSQL and Redis)" -}}
{{- end -}}
{{- if and .Values.cluster.enabled (not .Values.secrets.existingSecret) (not .Values.devDatabases.enabled) -}}
{{- if or (not .Values.postgresql.url) (not .Values.redis.url) -}}
{{- fail "cluster.enabled=true needs postgresql.url and redis.url (or secrets.existingSecret, or devDatabases.enabled=true for a dev cluster)" -}}
{{- end -}}
{{- end -}}
{{- if le (int .Values.api.terminationGracePeriodSeconds) (add (int .Values.api.drainSeconds) (int .Values.api.preStopSleepSeconds)) -}}
{{- fail "api.terminationGracePeriodSeconds must exceed api.drainSeconds + api.preStopSleepSeconds, or Kubernetes kills a node mid-drain" -}}
{{- end -}}
{{- if lt (mul (int .Values.api.drainSeconds) 1000) (mul (int .Values.config.SESSION_HANDOVER_WAIT_MS) 2) -}}
{{- fail "api.drainSeconds must cover two SESSION_HANDOVER_WAIT_MS (a session's handover waits for the in-flight requests, then for the new owner)" -}}
{{- end -}}
{{- if and .Values.cluster.enabled (eq .Values.cluster.mainDbReplication "raft") (not .Values.cluster.raftVoters) (gt (int .Values.cluster.raftVoterCount) (int .Values.api.replicas)) -}}
{{- fail "cluster.raftVoterCount cannot exceed api.replicas" -}}
{{- end -}}
{{- if and (eq (toString .Values.config.STORAGE_TYPE) "s3") (not .Values.s3.bucket) -}}
{{- fail "config.STORAGE_TYPE=s3 needs s3.bucket" -}}
{{- end -}}
{{- end -}}

{{/* Environment shared by API nodes and workers, beyond the ConfigMap and Secret. */}}
{{- define "wagate.clusterEnv" -}}
{{- $cluster := .Values.cluster.enabled -}}
- name: DATABASE_TYPE
  value: {{ ternary "postgres" "sqlite" $cluster }}
- name: REDIS_ENABLED
  value: {{ ternary "true" "false" $cluster | quote }}
{{- end -}}

{{/* Pod volumes both kinds of pod use: /tmp as an emptyDir (the root filesystem is read-only). */}}
{{- define "wagate.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.api.tmpSizeLimit }}
{{- end -}}
