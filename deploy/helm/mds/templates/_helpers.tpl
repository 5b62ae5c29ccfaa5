{{/* The labels of every object. */}}
{{- define "mds.labels" -}}
app.kubernetes.io/name: mds
{{- end }}

{{/* The image of both containers. */}}
{{- define "mds.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Settings that do not fit together. */}}
{{- define "mds.checks" -}}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicas) 1) }}
{{- fail "leaderElection.enabled=false needs replicas: 1; two controllers without a leader would both write" }}
{{- end }}
{{- if and (eq .Values.webhook.certificates.source "certManager") .Values.webhook.certificates.caBundle }}
{{- fail "webhook.certificates.caBundle is for source: secret; with certManager the CA is injected" }}
{{- end }}
{{- end }}
