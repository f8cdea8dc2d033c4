{{/* The chart name, or nameOverride. */}}
{{- define "poolsmith.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object's name. */}}
{{- define "poolsmith.fullname" -}}
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

{{- define "poolsmith.selectorLabels" -}}
app.kubernetes.io/name: {{ include "poolsmith.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "poolsmith.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "poolsmith.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "poolsmith.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "poolsmith.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The signals ConfigMap's namespace: the release's unless set. */}}
{{- define "poolsmith.signalsNamespace" -}}
{{- default .Release.Namespace .Values.signals.configMap.namespace }}
{{- end }}

{{- define "poolsmith.signalsConfigMap" -}}
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
