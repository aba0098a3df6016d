// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package manifests

import (
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func renderAndCheck(t *testing.T, dir string) ([]object, []string) {
	t.Helper()
	docs, err := render(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, problems := decode(docs)
	return objs, append(problems, check(objs)...)
}

func find[T any](objs []object, kind, name string) T {
	for _, o := range objs {
		if o.kind == kind && o.name == name {
			if v, ok := o.obj.(T); ok {
				return v
			}
		}
	}
	var zero T
	return zero
}

func TestManifests(t *testing.T) {
	root := repoRoot(t)
	for _, dir := range []string{"deploy/kubernetes/base", "deploy/kubernetes/overlays/dev"} {
		t.Run(dir, func(t *testing.T) {
			objs, problems := renderAndCheck(t, filepath.Join(root, dir))
			for _, p := range problems {
				t.Error(p)
			}
			// The pieces the design promises are all there.
			want := []string{
				"Namespace/nodepulse", "StatefulSet/etcd", "Service/etcd", "PodDisruptionBudget/etcd",
				"Deployment/collector", "Service/collector", "HorizontalPodAutoscaler/collector", "PodDisruptionBudget/collector",
				"Deployment/monitor", "Service/monitor", "PodDisruptionBudget/monitor",
				"DaemonSet/reporter", "NetworkPolicy/default-deny-ingress",
			}
			var have []string
			for _, o := range objs {
				have = append(have, o.kind+"/"+o.name)
			}
			for _, w := range want {
				if !slices.Contains(have, w) {
					t.Errorf("missing %s (have %v)", w, have)
				}
			}
			ds := find[*appsv1.DaemonSet](objs, "DaemonSet", "reporter")
			if ds == nil {
				return
			}
			for _, v := range ds.Spec.Template.Spec.Volumes {
				if v.HostPath != nil && !slices.Contains([]string{"/", "/proc", "/sys"}, v.HostPath.Path) {
					t.Errorf("reporter mounts host path %s; only /, /proc and /sys are expected", v.HostPath.Path)
				}
			}
			for _, o := range objs {
				if o.kind != "Namespace" && !strings.Contains(o.kind, "Priority") {
					if m := metaOf(o); m != nil && m.Namespace != "nodepulse" {
						t.Errorf("%s/%s is in namespace %q, want nodepulse", o.kind, o.name, m.Namespace)
					}
				}
			}
		})
	}
}

// TestDevOverlayIsPlaintext pins what the dev overlay changes: no TLS
// material anywhere, native gRPC probes, and images tagged dev.
func TestDevOverlayIsPlaintext(t *testing.T) {
	objs, problems := renderAndCheck(t, filepath.Join(repoRoot(t), "deploy/kubernetes/overlays/dev"))
	if len(problems) > 0 {
		t.Fatalf("dev overlay has problems: %v", problems)
	}
	for _, name := range []string{"collector", "monitor"} {
		d := find[*appsv1.Deployment](objs, "Deployment", name)
		c := d.Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--grpc.insecure") || c.LivenessProbe.GRPC == nil {
			t.Errorf("%s: dev overlay should be plaintext with gRPC probes: args=%v", name, c.Args)
		}
		if !strings.HasSuffix(c.Image, ":dev") {
			t.Errorf("%s: image %s, want tag dev", name, c.Image)
		}
	}
	for _, o := range objs {
		var spec *corev1.PodSpec
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			spec = &v.Spec.Template.Spec
		case *appsv1.StatefulSet:
			spec = &v.Spec.Template.Spec
		case *appsv1.DaemonSet:
			spec = &v.Spec.Template.Spec
		}
		if spec == nil {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Secret != nil {
				t.Errorf("%s/%s: dev overlay still mounts Secret %s", o.kind, o.name, v.Secret.SecretName)
			}
		}
	}
}

// TestBrokenFixtureIsRejected feeds the checks a kustomization with a
// misspelled field, a container without probes and a DaemonSet that does not
// tolerate taints, and requires each to be reported.
func TestBrokenFixtureIsRejected(t *testing.T) {
	_, problems := renderAndCheck(t, filepath.Join(repoRoot(t), "tests/manifests/testdata/broken"))
	joined := strings.Join(problems, "\n")
	for _, want := range []string{
		`Deployment/collector: unknown field "spec.template.spec.containers[0].readinesProbe"`,
		"Deployment/collector: container collector: no livenessProbe",
		"Deployment/collector: container collector: no readinessProbe",
		"Deployment/collector: container collector: securityContext.readOnlyRootFilesystem must be true",
		"DaemonSet/reporter: must tolerate every taint",
		"DaemonSet/reporter: container reporter: --collector.tls-ca=/etc/nodepulse/ca/ca.crt points at a path no volume is mounted on",
		"Service/collector: must be headless",
		"Deployment/collector: no PodDisruptionBudget",
		"no default-deny ingress policy",
		`DaemonSet/reporter: priorityClassName "", want system-node-critical`,
		"Deployment/collector: sets replicas (2) while HorizontalPodAutoscaler/collector scales it",
		"NetworkPolicy/reporter: admin port 9192 is open to every namespace",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("the checks did not report %q; they reported:\n%s", want, joined)
		}
	}
}
