{{/*
Every string a template writes is quoted (quote, toJson) or a whole structure (toYaml), so
no value can add a key, an item or a document. The names below are checked here as well
as by values.schema.json, so that a name the API server would refuse is refused, naming
the value, even when the schema is skipped (--skip-schema-validation).
*/}}

{{/* poolsmith.mustMatch fails unless a value matches a pattern: (list VALUE NAME PATTERN WHAT). */}}
{{- define "poolsmith.mustMatch" -}}
{{- $value := index . 0 }}
{{- if not (and (kindIs "string" $value) (regexMatch (index . 2) $value)) }}
{{- fail (printf "%s %s is not %s" (index . 1) (toJson $value) (index . 3)) }}
{{- end }}
{{- end }}

{{/* The chart name, or nameOverride. */}}
{{- define "poolsmith.name" -}}
{{- with .Values.nameOverride }}
{{- include "poolsmith.mustMatch" (list . "nameOverride" "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" "a DNS-1123 label") }}
{{- end }}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object's name. */}}
{{- define "poolsmith.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- include "poolsmith.mustMatch" (list .Values.fullnameOverride "fullnameOverride" "^[a-z]([-a-z0-9]*[a-z0-9])?$" "a DNS-1035 label") }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "poolsmith.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "poolsmith.selectorLabels" -}}
app.kubernetes.io/name: {{ include "poolsmith.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end }}

{{- define "poolsmith.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "poolsmith.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "poolsmith.serviceAccountName" -}}
{{- if not .Values.serviceAccount.create }}
{{- $_ := required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- with .Values.serviceAccount.name }}
{{- include "poolsmith.mustMatch" (list . "serviceAccount.name" `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$` "a DNS-1123 subdomain") }}
{{- end }}
{{- default (include "poolsmith.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/* The signals ConfigMap's namespace: the release's unless set. */}}
{{- define "poolsmith.signalsNamespace" -}}
{{- with .Values.signals.configMap.namespace }}
{{- include "poolsmith.mustMatch" (list . "signals.configMap.namespace" `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$` "a DNS-1123 label") }}
{{- end }}
{{- default .Release.Namespace .Values.signals.configMap.namespace }}
{{- end }}

{{- define "poolsmith.signalsConfigMap" -}}
{{- include "poolsmith.mustMatch" (list .Values.signals.configMap.name "signals.configMap.name" `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$` "a DNS-1123 subdomain") }}
{{- printf "%s/%s" (include "poolsmith.signalsNamespace" .) .Values.signals.configMap.name }}
{{- end }}

{{/* The manager image: digest wins over tag; the tag defaults to the chart's appVersion. */}}
{{- define "poolsmith.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The headroom namespace (--headroom-namespace), checked: the admission policies write it into CEL. */}}
{{- define "poolsmith.headroomNamespace" -}}
{{- include "poolsmith.mustMatch" (list .Values.headroom.namespace "headroom.namespace" `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$` "a DNS-1123 label") }}
{{- .Values.headroom.namespace }}
{{- end }}

{{/* The manager's username, as the API server names its service account, checked: the admission policies write it into CEL. */}}
{{- define "poolsmith.managerUser" -}}
{{- include "poolsmith.mustMatch" (list .Release.Namespace "the release namespace" `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$` "a DNS-1123 label") }}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "poolsmith.serviceAccountName" .) }}
{{- end }}
