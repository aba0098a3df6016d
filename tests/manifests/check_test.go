// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package manifests

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kinds are the only objects the manifests may contain, each with the one
// apiVersion a current cluster serves. Anything else fails the check, so a
// new kind is added here on purpose (with its rules), never by accident.
var kinds = map[string]struct {
	apiVersion string
	new        func() any
}{
	"Namespace":               {"v1", func() any { return &corev1.Namespace{} }},
	"ServiceAccount":          {"v1", func() any { return &corev1.ServiceAccount{} }},
	"Service":                 {"v1", func() any { return &corev1.Service{} }},
	"ConfigMap":               {"v1", func() any { return &corev1.ConfigMap{} }},
	"StatefulSet":             {"apps/v1", func() any { return &appsv1.StatefulSet{} }},
	"Deployment":              {"apps/v1", func() any { return &appsv1.Deployment{} }},
	"DaemonSet":               {"apps/v1", func() any { return &appsv1.DaemonSet{} }},
	"HorizontalPodAutoscaler": {"autoscaling/v2", func() any { return &autoscalingv2.HorizontalPodAutoscaler{} }},
	"PodDisruptionBudget":     {"policy/v1", func() any { return &policyv1.PodDisruptionBudget{} }},
	"NetworkPolicy":           {"networking.k8s.io/v1", func() any { return &networkingv1.NetworkPolicy{} }},
	"PriorityClass":           {"scheduling.k8s.io/v1", func() any { return &schedulingv1.PriorityClass{} }},
	"Role":                    {"rbac.authorization.k8s.io/v1", func() any { return &rbacv1.Role{} }},
	// Custom resources (crds_test.go), only in the optional components.
	"ServiceMonitor": {"monitoring.coreos.com/v1", func() any { return &serviceMonitor{} }},
	"PodMonitor":     {"monitoring.coreos.com/v1", func() any { return &podMonitor{} }},
	"PrometheusRule": {"monitoring.coreos.com/v1", func() any { return &prometheusRule{} }},
	"Issuer":         {"cert-manager.io/v1", func() any { return &issuer{} }},
	"Certificate":    {"cert-manager.io/v1", func() any { return &certificate{} }},
}

// secretNames are the Secrets the manifests may mount; each is documented in
// docs/operations.md (Kubernetes section) with the command that creates it.
// The cert-manager component gives collectors and monitors their own.
var secretNames = []string{"nodepulse-server-tls", "nodepulse-ca", "nodepulse-collector-tls", "nodepulse-monitor-tls"}

// object is one rendered manifest, decoded into its k8s.io/api type.
type object struct {
	kind, name string
	obj        any
}

// render runs kustomize (the Go library kubectl itself embeds) on dir.
func render(dir string) ([][]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var docs [][]byte
	for _, r := range rm.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		docs = append(docs, b)
	}
	return docs, nil
}

// decode decodes every document strictly (unknown or duplicate fields are
// errors, case-sensitively, as the API server's strict field validation
// does). A document with strict errors is still decoded leniently so the
// rules below run on it too and every problem is reported at once.
func decode(docs [][]byte) ([]object, []string) {
	var objs []object
	var problems []string
	for _, doc := range docs {
		var tm metav1.TypeMeta
		var meta struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.UnmarshalCaseSensitivePreserveInts(doc, &tm); err != nil {
			problems = append(problems, fmt.Sprintf("undecodable document: %v", err))
			continue
		}
		_ = json.UnmarshalCaseSensitivePreserveInts(doc, &meta)
		id := tm.Kind + "/" + meta.Metadata.Name
		k, ok := kinds[tm.Kind]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: kind %q is not one the checks know", id, tm.Kind))
			continue
		}
		if tm.APIVersion != k.apiVersion {
			problems = append(problems, fmt.Sprintf("%s: apiVersion %q, want %q", id, tm.APIVersion, k.apiVersion))
		}
		obj := k.new()
		strict, err := json.UnmarshalStrict(doc, obj, json.DisallowDuplicateFields, json.DisallowUnknownFields)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		for _, e := range strict {
			problems = append(problems, fmt.Sprintf("%s: %v", id, e))
		}
		objs = append(objs, object{tm.Kind, meta.Metadata.Name, obj})
	}
	return objs, problems
}

// check applies the deployment rules to a decoded set of objects and returns
// every violation, sorted.
func check(objs []object) []string {
	var p []string
	add := func(id, format string, args ...any) { p = append(p, id+": "+fmt.Sprintf(format, args...)) }

	type workload struct {
		id       string
		template *corev1.PodTemplateSpec
		selector *metav1.LabelSelector
		claims   []string // StatefulSet volumeClaimTemplates: volumes too
	}
	var workloads []workload
	services := map[string]*corev1.Service{}
	var pdbs []*policyv1.PodDisruptionBudget
	var hpas []*autoscalingv2.HorizontalPodAutoscaler
	var policies []*networkingv1.NetworkPolicy
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			workloads = append(workloads, workload{"Deployment/" + o.name, &v.Spec.Template, v.Spec.Selector, nil})
		case *appsv1.StatefulSet:
			var claims []string
			for _, c := range v.Spec.VolumeClaimTemplates {
				claims = append(claims, c.Name)
			}
			workloads = append(workloads, workload{"StatefulSet/" + o.name, &v.Spec.Template, v.Spec.Selector, claims})
		case *appsv1.DaemonSet:
			workloads = append(workloads, workload{"DaemonSet/" + o.name, &v.Spec.Template, v.Spec.Selector, nil})
		case *corev1.Service:
			services[o.name] = v
		case *policyv1.PodDisruptionBudget:
			pdbs = append(pdbs, v)
		case *autoscalingv2.HorizontalPodAutoscaler:
			hpas = append(hpas, v)
		case *networkingv1.NetworkPolicy:
			policies = append(policies, v)
		}
	}
	selects := func(sel *metav1.LabelSelector, t *corev1.PodTemplateSpec) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		return err == nil && sel != nil && !s.Empty() && s.Matches(labels.Set(t.Labels))
	}

	for _, w := range workloads {
		if !selects(w.selector, w.template) {
			add(w.id, "selector does not match the pod template labels")
		}
		p = append(p, checkPod(w.id, &w.template.Spec, w.claims)...)
	}

	for _, o := range objs {
		id := o.kind + "/" + o.name
		switch v := o.obj.(type) {
		case *appsv1.DaemonSet:
			if !tolerates(v.Spec.Template.Spec.Tolerations) {
				add(id, "must tolerate every taint (a toleration with operator Exists and no key): a tainted or unreachable machine still needs its reporter")
			}
			c := v.Spec.Template.Spec.Containers
			if len(c) > 0 && !nodeNameFromDownwardAPI(c[0]) {
				add(id, "container %s: the node name must come from the downward API (fieldRef spec.nodeName)", c[0].Name)
			}
			if len(c) > 0 && !slices.Contains(c[0].Args, "--host-root=/host") {
				add(id, "container %s: reads the host through --host-root=/host", c[0].Name)
			}
			if v.Spec.Template.Spec.PriorityClassName != "system-node-critical" {
				add(id, "priorityClassName %q, want system-node-critical (the node's health reporter is evicted last)", v.Spec.Template.Spec.PriorityClassName)
			}
		case *appsv1.StatefulSet:
			r := int32(1)
			if v.Spec.Replicas != nil {
				r = *v.Spec.Replicas
			}
			if r < 3 || r%2 == 0 {
				add(id, "replicas = %d: an etcd cluster needs an odd number, at least 3", r)
			}
			if v.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
				add(id, "podManagementPolicy must be Parallel (members wait for a quorum before they are Ready)")
			}
			if a := v.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil {
				add(id, "no pod anti-affinity: two members on one machine lose quorum together")
			}
			svc := services[v.Spec.ServiceName]
			switch {
			case svc == nil:
				add(id, "serviceName %q names no Service", v.Spec.ServiceName)
			case svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses:
				add(id, "Service %s must be headless with publishNotReadyAddresses (peers find each other before they are Ready)", svc.Name)
			}
			if c := v.Spec.Template.Spec.Containers; len(c) > 0 {
				for _, a := range c[0].Args {
					if m, ok := strings.CutPrefix(a, "--initial-cluster="); ok && int32(len(strings.Split(m, ","))) != r {
						add(id, "--initial-cluster names %d members, replicas = %d", len(strings.Split(m, ",")), r)
					}
				}
			}
		case *appsv1.Deployment:
			if o.name == "monitor" && (v.Spec.Replicas == nil || *v.Spec.Replicas < 2) {
				add(id, "needs at least 2 replicas (one leader, one standby)")
			}
		}
	}

	// Every workload of several replicas has a PodDisruptionBudget.
	for _, w := range workloads {
		if strings.HasPrefix(w.id, "DaemonSet/") {
			continue
		}
		found := false
		for _, b := range pdbs {
			if selects(b.Spec.Selector, w.template) {
				found = true
			}
		}
		if !found {
			add(w.id, "no PodDisruptionBudget selects its pods")
		}
	}
	for _, b := range pdbs {
		if b.Spec.MinAvailable == nil && b.Spec.MaxUnavailable == nil {
			add("PodDisruptionBudget/"+b.Name, "sets neither minAvailable nor maxUnavailable")
		}
	}
	for _, h := range hpas {
		ok := false
		for _, o := range objs {
			if o.kind == h.Spec.ScaleTargetRef.Kind && o.name == h.Spec.ScaleTargetRef.Name {
				ok = true
			}
		}
		if !ok {
			add("HorizontalPodAutoscaler/"+h.Name, "scaleTargetRef %s/%s does not exist", h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
			add("HorizontalPodAutoscaler/"+h.Name, "minReplicas must be set, ≥ 1 and ≤ maxReplicas")
		}
		// The autoscaler owns the count: a replicas field in the manifest is
		// set back on every apply and fights it.
		if d, ok := findObj(objs, h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name).(*appsv1.Deployment); ok && d.Spec.Replicas != nil {
			add("Deployment/"+d.Name, "sets replicas (%d) while HorizontalPodAutoscaler/%s scales it: leave replicas to the autoscaler", *d.Spec.Replicas, h.Name)
		}
	}

	// Services select a workload and target ports it declares.
	for name, s := range services {
		id := "Service/" + name
		var match *workload
		for i := range workloads {
			if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(workloads[i].template.Labels)) {
				match = &workloads[i]
			}
		}
		if match == nil {
			add(id, "selector %v matches no workload", s.Spec.Selector)
			continue
		}
		for _, sp := range s.Spec.Ports {
			if sp.TargetPort.StrVal != "" && !hasNamedPort(match.template.Spec.Containers, sp.TargetPort.StrVal) {
				add(id, "targetPort %q is not a named port of %s", sp.TargetPort.StrVal, match.id)
			}
		}
	}
	if c := services["collector"]; c != nil && c.Spec.ClusterIP != corev1.ClusterIPNone {
		add("Service/collector", "must be headless: reporters balance their long-lived streams client-side over every collector address")
	}

	// Ingress is denied by default, and every workload is opened explicitly.
	if len(policies) > 0 || len(workloads) > 0 {
		deny := false
		for _, np := range policies {
			if len(np.Spec.PodSelector.MatchLabels) == 0 && len(np.Spec.PodSelector.MatchExpressions) == 0 &&
				slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) && len(np.Spec.Ingress) == 0 {
				deny = true
			}
		}
		if !deny {
			add("NetworkPolicy", "no default-deny ingress policy (empty podSelector, policyTypes [Ingress], no rules)")
		}
		for _, w := range workloads {
			open := false
			for _, np := range policies {
				if len(np.Spec.PodSelector.MatchLabels) > 0 && selects(&np.Spec.PodSelector, w.template) && len(np.Spec.Ingress) > 0 {
					open = true
				}
			}
			if !open {
				add(w.id, "no NetworkPolicy allows ingress to it (the default deny would cut it off)")
			}
		}
	}
	_, mp := checkMonitoring(objs)
	p = append(p, mp...)
	p = append(p, checkCertificates(objs)...)

	// Admin ports serve /metrics and /debug/pprof: only Prometheus's
	// namespace may reach them, never every namespace or every address.
	for _, np := range policies {
		for _, rule := range np.Spec.Ingress {
			for _, port := range rule.Ports {
				if port.Port == nil || !slices.Contains(adminPorts, port.Port.IntVal) {
					continue
				}
				if len(rule.From) == 0 {
					add("NetworkPolicy/"+np.Name, "admin port %d is open to every source", port.Port.IntVal)
				}
				for _, peer := range rule.From {
					if peer.IPBlock != nil || (peer.NamespaceSelector != nil && len(peer.NamespaceSelector.MatchLabels) == 0 && len(peer.NamespaceSelector.MatchExpressions) == 0) {
						add("NetworkPolicy/"+np.Name, "admin port %d is open to every namespace or an address block; allow only the monitoring namespace", port.Port.IntVal)
					}
				}
			}
		}
	}
	sort.Strings(p)
	return p
}

// adminPorts serve /metrics and /debug/pprof (collector, monitor, reporter)
// or etcd's metrics.
var adminPorts = []int32{9190, 9191, 9192, 2381}

// findObj returns the decoded object of a kind and name, or nil.
func findObj(objs []object, kind, name string) any {
	for _, o := range objs {
		if o.kind == kind && o.name == name {
			return o.obj
		}
	}
	return nil
}

// checkPod applies the per-pod and per-container rules.
func checkPod(id string, spec *corev1.PodSpec, claims []string) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, id+": "+fmt.Sprintf(format, args...)) }
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		add("automountServiceAccountToken must be false (nodepulse never calls the Kubernetes API)")
	}
	if spec.HostPID || spec.HostNetwork || spec.HostIPC {
		add("must not share the host's PID, network or IPC namespace")
	}
	volumes := map[string]corev1.Volume{}
	for _, c := range claims {
		volumes[c] = corev1.Volume{Name: c}
	}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
		if v.Secret != nil && !slices.Contains(secretNames, v.Secret.SecretName) {
			add("volume %s mounts Secret %q, not one of the documented %v", v.Name, v.Secret.SecretName, secretNames)
		}
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		cid := "container " + c.Name
		if c.Image == "" || !strings.Contains(path.Base(c.Image), ":") || strings.HasSuffix(c.Image, ":latest") {
			add("%s: image %q must carry a version tag", cid, c.Image)
		}
		if c.LivenessProbe == nil {
			add("%s: no livenessProbe", cid)
		}
		if c.ReadinessProbe == nil {
			add("%s: no readinessProbe", cid)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[r]; !ok {
				add("%s: no %s request", cid, r)
			}
		}
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			add("%s: no memory limit", cid)
		}
		sc := c.SecurityContext
		switch {
		case sc == nil:
			add("%s: no securityContext", cid)
		default:
			if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				add("%s: securityContext.runAsNonRoot must be true", cid)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				add("%s: securityContext.readOnlyRootFilesystem must be true", cid)
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				add("%s: securityContext.allowPrivilegeEscalation must be false", cid)
			}
			if sc.Privileged != nil && *sc.Privileged {
				add("%s: must not be privileged", cid)
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				add("%s: securityContext.capabilities must drop ALL and add none", cid)
			}
			if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				add("%s: securityContext.seccompProfile.type must be RuntimeDefault", cid)
			}
		}
		// Probes: where the container serves gRPC in plaintext, the kubelet's
		// native gRPC probe checks the real server; with mTLS it cannot (it
		// presents no client certificate), so the admin port's HTTP
		// /healthz and /readyz are used.
		if port, ok := namedPort(c, "grpc"); ok {
			plaintext := slices.Contains(c.Args, "--grpc.insecure")
			for name, pr := range map[string]*corev1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
				switch {
				case pr == nil:
				case plaintext && (pr.GRPC == nil || pr.GRPC.Port != port):
					add("%s: %s must be a native gRPC probe on port %d (the server is plaintext)", cid, name, port)
				case !plaintext && (pr.HTTPGet == nil || pr.HTTPGet.Port.StrVal != "admin"):
					add("%s: %s must be an HTTP probe on the admin port (the gRPC port requires client certificates)", cid, name)
				}
			}
		}
		for name, pr := range map[string]*corev1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe, "startupProbe": c.StartupProbe} {
			if pr != nil && pr.HTTPGet != nil && pr.HTTPGet.Port.StrVal != "" {
				if _, ok := namedPort(c, pr.HTTPGet.Port.StrVal); !ok {
					add("%s: %s uses port %q, which the container does not declare", cid, name, pr.HTTPGet.Port.StrVal)
				}
			}
		}
		if slices.Contains(c.Args, "--grpc.insecure") && slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--grpc.tls-") }) {
			add("%s: both --grpc.insecure and --grpc.tls-* flags", cid)
		}
		var mounts []string
		for _, m := range c.VolumeMounts {
			v, ok := volumes[m.Name]
			if !ok {
				add("%s: volumeMount %s names no volume", cid, m.Name)
				continue
			}
			if v.HostPath != nil && !m.ReadOnly {
				add("%s: hostPath volume %s must be mounted readOnly", cid, m.Name)
			}
			mounts = append(mounts, m.MountPath)
		}
		// Every file a flag points at must be on a mounted volume: catches
		// an overlay that removes a Secret but keeps the flag naming it.
		for _, a := range c.Args {
			_, val, ok := strings.Cut(a, "=")
			if !ok || !strings.HasPrefix(val, "/") {
				continue
			}
			if strings.HasPrefix(a, "--host-root=") {
				val += "/"
			}
			if !slices.ContainsFunc(mounts, func(m string) bool { return strings.HasPrefix(val, strings.TrimSuffix(m, "/")+"/") }) {
				add("%s: %s points at a path no volume is mounted on", cid, a)
			}
		}
	}
	return p
}

func namedPort(c corev1.Container, name string) (int32, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

func hasNamedPort(cs []corev1.Container, name string) bool {
	for _, c := range cs {
		if _, ok := namedPort(c, name); ok {
			return true
		}
	}
	return false
}

func tolerates(ts []corev1.Toleration) bool {
	for _, t := range ts {
		if t.Key == "" && t.Operator == corev1.TolerationOpExists && t.Effect == "" {
			return true
		}
	}
	return false
}

func nodeNameFromDownwardAPI(c corev1.Container) bool {
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" &&
			(e.Name == "NODEPULSE_NODE_NAME" || slices.Contains(c.Args, "--node-name=$("+e.Name+")")) {
			return true
		}
	}
	return false
}
