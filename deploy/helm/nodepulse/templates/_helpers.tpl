{{/*
Labels on every object. Resource names are fixed (etcd, collector, monitor,
reporter), as in the kustomize base, so the two render the same objects: one
release per namespace.
*/}}
{{- define "nodepulse.labels" -}}
app.kubernetes.io/part-of: nodepulse
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* image: (list $ "collector") -> <repository>/collector:<tag> */}}
{{- define "nodepulse.image" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- printf "%s/%s:%s" $root.Values.image.repository $name (default $root.Chart.AppVersion $root.Values.image.tag) -}}
{{- end }}

{{/* Every etcd member's client address, for --etcd.endpoints. */}}
{{- define "nodepulse.etcdEndpoints" -}}
{{- $ns := .Release.Namespace -}}
{{- $eps := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $eps = append $eps (printf "etcd-%d.etcd.%s.svc:2379" $i $ns) -}}
{{- end -}}
{{- join "," $eps -}}
{{- end }}

{{/* etcd's --initial-cluster; the pods expand $(POD_NAMESPACE). */}}
{{- define "nodepulse.etcdInitialCluster" -}}
{{- $m := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $m = append $m (printf "etcd-%d=https://etcd-%d.etcd.$(POD_NAMESPACE).svc:2380" $i $i) -}}
{{- end -}}
{{- join "," $m -}}
{{- end }}

{{/*
The server certificate Secret of a component: with cert-manager, collectors
and monitors have their own (nodepulse-<component>-tls); otherwise all share
tls.serverSecret, as `nodepulse certs init` makes it.
*/}}
{{- define "nodepulse.serverSecret" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- if $root.Values.certManager.enabled -}}
{{- printf "nodepulse-%s-tls" $name -}}
{{- else -}}
{{- $root.Values.tls.serverSecret -}}
{{- end -}}
{{- end }}
