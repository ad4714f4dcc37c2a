{{/* The chart's name, or nameOverride. */}}
{{- define "tandem.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's objects' name: the release name when it already holds the chart's name. */}}
{{- define "tandem.fullname" -}}
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

{{- define "tandem.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tandem.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tandem.labels" -}}
{{ include "tandem.selectorLabels" . }}
{{- /* A label value allows no "+": a build between releases
(0.1.0-dev+<hash>) gets "_", as in its image tag. */}}
app.kubernetes.io/version: {{ .Chart.AppVersion | replace "+" "_" | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "tandem.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tandem.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: name the existing ServiceAccount the encoder uses (or set serviceAccount.create)" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- /* The default tag is appVersion with SemVer's "+" as "_" (a tag may
not hold "+"): what make image and make release tag (tools/release ImageTag). */ -}}
{{- define "tandem.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default (.Chart.AppVersion | replace "+" "_") .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The encoder's config file (--config-path): the outputs list and relabel rules. */}}
{{- define "tandem.configFile" -}}
{{- $c := dict -}}
{{- with .Values.output.outputs }}{{ $_ := set $c "outputs" . }}{{ end -}}
{{- with .Values.relabelConfigs }}{{ $_ := set $c "relabel_configs" . }}{{ end -}}
{{- if $c }}{{ toYaml $c }}{{ end -}}
{{- end -}}

{{/* Values that cannot work together fail the install with the fix. */}}
{{- define "tandem.validate" -}}
{{- $o := .Values.output -}}
{{- if and $o.remoteStore.address $o.outputs -}}
{{- fail "output: set output.remoteStore.address or output.outputs, not both (the encoder takes one description of its outputs)" -}}
{{- end -}}
{{- if and (not $o.remoteStore.address) (not $o.outputs) (not $o.pprof.dir) -}}
{{- fail "output: no output configured: set output.remoteStore.address (an OTLP or Parca receiver), output.outputs, or output.pprof.dir" -}}
{{- end -}}
{{- /* JSON schema cannot say "unique by name"; the encoder refuses a
repeated name at start (encoder/output ParseOutputs), here at install. */ -}}
{{- $names := dict -}}
{{- range $i, $out := $o.outputs -}}
{{- if hasKey $names $out.name -}}
{{- fail (printf "output.outputs: the name %q is used by entries %d and %d (counting from 1): give each output its own name (it labels the output's metrics)" $out.name (get $names $out.name) (add1 $i)) -}}
{{- end -}}
{{- $_ := set $names $out.name (add1 $i) -}}
{{- end -}}
{{- if and $o.remoteStore.otlpLogging (not $o.remoteStore.address) -}}
{{- fail "output.remoteStore.otlpLogging needs output.remoteStore.address" -}}
{{- end -}}
{{- if and $o.remoteStore.insecure $o.remoteStore.tlsSecret.name -}}
{{- fail "output.remoteStore: insecure (plaintext) contradicts tlsSecret: drop one" -}}
{{- end -}}
{{- if and $o.remoteStore.tlsSecret.name (not (or $o.remoteStore.tlsSecret.caKey $o.remoteStore.tlsSecret.clientCertKey)) -}}
{{- fail "output.remoteStore.tlsSecret: name a caKey, or clientCertKey and clientKeyKey" -}}
{{- end -}}
{{- if ne (empty $o.remoteStore.tlsSecret.clientCertKey) (empty $o.remoteStore.tlsSecret.clientKeyKey) -}}
{{- fail "output.remoteStore.tlsSecret: mutual TLS needs both clientCertKey and clientKeyKey" -}}
{{- end -}}
{{- /* Checks a schema pattern could make, here for a message that names
the fix (Helm prints a failed pattern as the raw regular expression). */ -}}
{{- range $name, $addr := dict "output.remoteStore.address" $o.remoteStore.address "debuginfo.address" .Values.debuginfo.address -}}
{{- if and $addr (not (regexMatch `^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):[0-9]{1,5}$` $addr)) -}}
{{- fail (printf "%s %q: want host:PORT, e.g. collector.observability:4317 (an IPv6 address in brackets: [fd00::1]:4317)" $name $addr) -}}
{{- end -}}
{{- end -}}
{{- $tracers := splitList "," (include "tandem.tracers" .) -}}
{{- if ne .Values.sampler.tracers "all" -}}
{{- range splitList "," .Values.sampler.tracers -}}
{{- if not (has . $tracers) -}}
{{- if eq . "go" -}}
{{- fail "sampler.tracers: go is not listed: Go symbolization adds it (sampler.extraArgs: [--symbolize-go])" -}}
{{- end -}}
{{- fail (printf "sampler.tracers: %q is not a tracer: want all, or a comma-separated list of %s" . (join ", " $tracers)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled .Values.metrics.podMonitor.enabled -}}
{{- fail "metrics: enable metrics.serviceMonitor or metrics.podMonitor, not both (each pod would be scraped twice)" -}}
{{- end -}}
{{- if and (or .Values.metrics.serviceMonitor.enabled) (not .Values.metrics.service.enabled) -}}
{{- fail "metrics.serviceMonitor needs metrics.service.enabled (it selects the Service)" -}}
{{- end -}}
{{- end -}}

{{/* The namespace every object goes in: the release's (helm install -n). */}}
{{- define "tandem.namespace" -}}
{{- .Release.Namespace -}}
{{- end -}}
