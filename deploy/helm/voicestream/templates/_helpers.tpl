{{/* Names and labels. */}}
{{- define "voicestream.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "voicestream.speech" -}}{{ include "voicestream.fullname" . }}-speech{{- end -}}
{{- define "voicestream.agent" -}}{{ include "voicestream.fullname" . }}-agent{{- end -}}

{{- define "voicestream.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: speech, agent or test. */}}
{{- define "voicestream.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The flavor is both the --device and, unless one is given, the image tag. */}}
{{- define "voicestream.flavor" -}}{{ ternary "cuda" "cpu" .Values.gpu.enabled }}{{- end -}}
{{- define "voicestream.speechImage" -}}
{{ .Values.speech.image.repository }}:{{ .Values.speech.image.tag | default (include "voicestream.flavor" .) }}
{{- end -}}

{{/* int8 on CPU, fp16 on CUDA, unless model.variant says otherwise. */}}
{{- define "voicestream.variant" -}}
{{ .Values.model.variant | default (ternary "fp16" "int8" .Values.gpu.enabled) }}
{{- end -}}

{{/* The speech pod's terminationGracePeriodSeconds: SIGTERM comes after the preStop sleep,
then the server exits within its own deadline (voicestream.edge.drain): in-flight requests get
--grace-s, what was cut the close time, uvicorn and the exit the shutdown time. Computed here
so that it is never typed twice. */}}
{{- define "voicestream.speechTerminationGrace" -}}
{{- with .Values.drain -}}
{{ addf .preStopSeconds .graceSeconds .sessionCloseSeconds .shutdownSeconds | ceil | int }}
{{- end -}}
{{- end -}}

{{/* The agent drains the same way (--grace-s of its own, the same close and shutdown), after
the same preStop sleep. */}}
{{- define "voicestream.agentTerminationGrace" -}}
{{- with .Values.drain -}}
{{ addf .preStopSeconds $.Values.agent.graceSeconds .sessionCloseSeconds .shutdownSeconds | ceil | int }}
{{- end -}}
{{- end -}}

{{/* The Secret holding the API key, or nothing when there is no key. */}}
{{- define "voicestream.apiKeySecret" -}}
{{- if .Values.apiKey.existingSecret -}}
{{ .Values.apiKey.existingSecret }}
{{- else if .Values.apiKey.value -}}
{{ include "voicestream.fullname" . }}-api-key
{{- end -}}
{{- end -}}

{{- define "voicestream.apiKeyEnv" -}}
{{- with include "voicestream.apiKeySecret" . -}}
- name: VOICESTREAM_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.apiKey.secretKey }}
{{- end }}
{{- end -}}

{{/* Hardening shared by every pod and container of the chart. */}}
{{- define "voicestream.podSecurity" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsUser }}
fsGroup: {{ .Values.runAsUser }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "voicestream.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsUser }}
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* What limits a replica: the gauge the speech server exports on /metrics. */}}
{{- define "voicestream.sessionsMetric" -}}voicestream_active_sessions{{- end -}}
