{{/* The release's name for every object: <release>-sluice, or the release
name alone when it says sluice already. */}}
{{- define "sluice.fullname" -}}
{{- if contains "sluice" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-sluice" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "gateway"). */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: sluice
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sluice.labels" -}}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version }}
{{- end -}}

{{- define "sluice.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The Secret the servers read: existingSecret, else the chart's. */}}
{{- define "sluice.secretName" -}}
{{- .Values.existingSecret | default (include "sluice.fullname" .) -}}
{{- end -}}

{{/* The gateway's config: gateway.config with the chart's store and API
keys file. */}}
{{- define "sluice.gatewayConfig" -}}
{{- $cfg := deepCopy .Values.gateway.config -}}
{{- if .Values.storeURL -}}
{{- $_ := set $cfg "store" .Values.storeURL -}}
{{- end -}}
{{- if .Values.secrets.apiKeys -}}
{{- $id := get $cfg "identity" | default dict -}}
{{- $_ := set $id "api_keys_file" "keys.txt" -}}
{{- $_ := set $cfg "identity" $id -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* SLUICE_ADMIN_TOKEN from the Secret, when it has one. */}}
{{- define "sluice.adminTokenEnv" -}}
- name: SLUICE_ADMIN_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "sluice.secretName" . }}
      key: admin-token
      optional: true
{{- end -}}

{{/* A PodDisruptionBudget: (dict "ctx" $ "component" "gateway" "pdb" .Values.gateway.pdb). */}}
{{- define "sluice.pdb" -}}
{{- if .pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "sluice.fullname" .ctx }}-{{ .component }}
  labels:
    {{- include "sluice.labels" . | nindent 4 }}
spec:
  {{- if hasKey .pdb "minAvailable" }}
  minAvailable: {{ .pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ .pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "sluice.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}
