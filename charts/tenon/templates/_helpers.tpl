{{/* The chart's name, as Karpenter's chart computes it (nameOverride). */}}
{{- define "tenon.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Every object's name: fullnameOverride, else the release name when it already holds the
chart's name, else RELEASE-NAME (Karpenter's rule). */}}
{{- define "tenon.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "tenon.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tenon.labels" -}}
{{ include "tenon.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "tenon.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tenon.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* `annotations:` for an object's metadata: additionalAnnotations, then the object's own. */}}
{{- define "tenon.annotations" -}}
{{- $all := merge (deepCopy (.own | default dict)) (.root.Values.additionalAnnotations | default dict) -}}
{{- with $all -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount: the chart's own (fullname unless named), or the one named, else
`default` when the chart creates none (Karpenter's rule). */}}
{{- define "tenon.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tenon.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image: controller.image, `repository:tag[@digest]`. Karpenter's own image would run
Karpenter, not Tenon: a values file that pins it is refused. */}}
{{- define "tenon.image" -}}
{{- $image := .Values.controller.image -}}
{{- if contains "karpenter/controller" $image.repository -}}
{{- fail (printf "controller.image.repository: %q is Karpenter's image; remove controller.image from your values to run Tenon's (%s)" $image.repository "tenon/controller") -}}
{{- end -}}
{{- $ref := printf "%s:%s" $image.repository ($image.tag | default .Chart.AppVersion) -}}
{{- if $image.digest -}}
{{- $ref = printf "%s@%s" $ref $image.digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{/* FEATURE_GATES from settings.featureGates: Karpenter's map (gates in Karpenter's order,
then any others), or a `Name=true,...` string as given. Gates Tenon does not implement are
refused here, when set true, rather than by a controller in CrashLoopBackOff. */}}
{{- define "tenon.featureGates" -}}
{{- $gates := .Values.settings.featureGates -}}
{{- if kindIs "string" $gates -}}
{{- $gates -}}
{{- else -}}
{{- $supported := list "reservedCapacity" "spotToSpotConsolidation" -}}
{{- $order := list "reservedCapacity" "spotToSpotConsolidation" "nodeRepair" "nodeOverlay" "staticCapacity" "capacityBuffer" -}}
{{- range $k := keys $gates | sortAlpha -}}
{{- if not (has $k $order) -}}{{- $order = append $order $k -}}{{- end -}}
{{- end -}}
{{- $out := list -}}
{{- range $k := $order -}}
{{- if hasKey $gates $k -}}
{{- $v := index $gates $k -}}
{{- if and (not (kindIs "bool" $v)) (not (has (toString $v) (list "true" "false"))) -}}
{{- fail (printf "settings.featureGates.%s: %v is not true or false" $k $v) -}}
{{- end -}}
{{- if and (eq (toString $v) "true") (not (has $k $supported)) -}}
{{- fail (printf "settings.featureGates.%s: Tenon does not implement this gate; set it to false or remove it (supported: reservedCapacity, spotToSpotConsolidation)" $k) -}}
{{- end -}}
{{- $out = append $out (printf "%s=%v" (title $k) $v) -}}
{{- end -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}
{{- end -}}

{{/* A list of pod (anti-)affinity terms or topology spread constraints, each given the
chart's pods as labelSelector when it has none (Karpenter's patchAffinity and
patchTopologySpreadConstraints). */}}
{{- define "tenon.patchTerms" -}}
{{- $root := .root -}}
{{- $terms := list -}}
{{- range .terms -}}
{{- $t := deepCopy . -}}
{{- if hasKey $t "podAffinityTerm" -}}
{{- if not (hasKey $t.podAffinityTerm "labelSelector") -}}
{{- $_ := set $t.podAffinityTerm "labelSelector" (dict "matchLabels" (include "tenon.selectorLabels" $root | fromYaml)) -}}
{{- end -}}
{{- else if not (hasKey $t "labelSelector") -}}
{{- $_ := set $t "labelSelector" (dict "matchLabels" (include "tenon.selectorLabels" $root | fromYaml)) -}}
{{- end -}}
{{- $terms = append $terms $t -}}
{{- end -}}
{{- toYaml $terms -}}
{{- end -}}

{{- define "tenon.affinity" -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) -}}
{{- range $kind := list "podAffinity" "podAntiAffinity" -}}
{{- $byWhen := index $affinity $kind -}}
{{- if $byWhen -}}
{{- range $when := list "requiredDuringSchedulingIgnoredDuringExecution" "preferredDuringSchedulingIgnoredDuringExecution" -}}
{{- $terms := index $byWhen $when -}}
{{- if $terms -}}
{{- $_ := set $byWhen $when (include "tenon.patchTerms" (dict "root" $ "terms" $terms) | fromYamlArray) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $affinity -}}
{{- end -}}

{{/* The chart's own environment for the controller, as a YAML list (the Deployment adds
controller.env after it). */}}
{{- define "tenon.chartEnv" -}}
- name: CLUSTER_NAME
  value: {{ tpl .Values.settings.clusterName . | quote }}
{{- with .Values.settings.clusterEndpoint }}
- name: CLUSTER_ENDPOINT
  value: {{ tpl . $ | quote }}
{{- end }}
{{- with .Values.settings.clusterCABundle }}
- name: CLUSTER_CA_BUNDLE
  value: {{ tpl . $ | quote }}
{{- end }}
{{- with .Values.settings.serviceCIDR }}
- name: SERVICE_CIDR
  value: {{ . | quote }}
{{- end }}
{{- with .Values.settings.interruptionQueue }}
- name: INTERRUPTION_QUEUE
  value: {{ tpl . $ | quote }}
{{- end }}
- name: BATCH_MAX_DURATION
  value: {{ tpl (toString .Values.settings.batchMaxDuration) . | quote }}
- name: BATCH_IDLE_DURATION
  value: {{ tpl (toString .Values.settings.batchIdleDuration) . | quote }}
- name: FEATURE_GATES
  value: {{ include "tenon.featureGates" . | quote }}
- name: PREFERENCE_POLICY
  value: {{ .Values.settings.preferencePolicy | quote }}
- name: MIN_VALUES_POLICY
  value: {{ .Values.settings.minValuesPolicy | quote }}
- name: VM_MEMORY_OVERHEAD_PERCENT
  value: {{ .Values.settings.vmMemoryOverheadPercent | quote }}
- name: RESERVED_ENIS
  value: {{ .Values.settings.reservedENIs | quote }}
{{- with .Values.settings.schedulerConfig }}
- name: SCHEDULER_CONFIG
  value: {{ (kindIs "string" .) | ternary . (toJson .) | quote }}
{{- end }}
- name: KUBE_CLIENT_QPS
  value: {{ .Values.settings.kubeClientQPS | quote }}
- name: KUBE_CLIENT_BURST
  value: {{ .Values.settings.kubeClientBurst | quote }}
{{- with .Values.settings.awsRegion }}
- name: AWS_REGION
  value: {{ . | quote }}
{{- end }}
- name: DISABLE_LEADER_ELECTION
  value: {{ (not .Values.settings.leaderElection) | quote }}
- name: LEADER_ELECTION_NAME
  value: {{ .Values.settings.leaderElectionName | quote }}
- name: TENON_KARPENTER_LEASE
  value: {{ .Values.settings.karpenterLease | quote }}
- name: SYSTEM_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: METRICS_PORT
  value: {{ .Values.controller.metrics.port | quote }}
- name: HEALTH_PROBE_PORT
  value: {{ .Values.controller.healthProbe.port | quote }}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
- name: TENON_POLICY_DIR
  value: /etc/tenon/policies
- name: TENON_POLICY_DEADLINE_MS
  value: {{ .Values.policies.deadlineMs | quote }}
- name: TENON_POLICY_ALLOW_TAGS
  value: {{ .Values.policies.trust.allowTags | quote }}
{{- with .Values.policies.trust.ociSources }}
- name: TENON_POLICY_OCI_SOURCES
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.policies.trust.localPolicies }}
- name: TENON_POLICY_LOCAL_POLICIES
  value: {{ join "," . | quote }}
{{- end }}
{{- if .Values.policies.trust.signatureKeysConfigMap }}
- name: TENON_POLICY_SIGNATURE_KEYS
  value: /etc/tenon/signature-keys
{{- end }}
{{- with .Values.policies.oci.insecureRegistries }}
- name: TENON_POLICY_INSECURE_REGISTRIES
  value: {{ join "," . | quote }}
{{- end }}
{{- if .Values.policies.oci.registryConfigSecret }}
- name: TENON_POLICY_OCI_REGISTRY_CONFIG
  value: /etc/tenon/registry/config.json
{{- end }}
{{- with .Values.policies.oci.extraHosts }}
- name: TENON_POLICY_OCI_EXTRA_HOSTS
  value: {{ join "," . | quote }}
{{- end }}
{{- if .Values.policies.oci.caBundleConfigMap }}
- name: TENON_POLICY_OCI_CA_BUNDLE
  value: /etc/tenon/registry-ca/ca.crt
{{- end }}
- name: TENON_POLICY_OCI_PULL_TIMEOUT
  value: {{ .Values.policies.oci.pullTimeout | quote }}
- name: TENON_POLICY_OCI_MAX_PULLS
  value: {{ .Values.policies.oci.maxConcurrentPulls | quote }}
# The precompiled-policy cache and the policies pulled from OCI registries:
# private to the controller's user, on the writable emptyDir (the root
# filesystem is read-only).
- name: XDG_CACHE_HOME
  value: /tmp/cache
{{- end -}}
