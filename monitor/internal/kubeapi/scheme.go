// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"fmt"
	"reflect"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// The served group versions and their k8s.io/api packages.
var served = []struct {
	gv  schema.GroupVersion
	add func(*runtime.Scheme) error
}{
	{corev1.SchemeGroupVersion, corev1.AddToScheme},
	{coordinationv1.SchemeGroupVersion, coordinationv1.AddToScheme},
	{policyv1.SchemeGroupVersion, policyv1.AddToScheme},
	{appsv1.SchemeGroupVersion, appsv1.AddToScheme},
	{autoscalingv1.SchemeGroupVersion, autoscalingv1.AddToScheme},
	{authorizationv1.SchemeGroupVersion, authorizationv1.AddToScheme},
	{authenticationv1.SchemeGroupVersion, authenticationv1.AddToScheme},
}

// newScheme registers the k8s.io/api types served, each also as its own
// group's internal ("hub") version. k8s.io/apiserver converts every request
// to the hub version and back; kube-apiserver's hub types live in
// k8s.io/kubernetes, which is not importable, so here the versioned type is
// its own hub and the conversion is a copy (the scheme sees the target kind
// among the object's kinds and only resets its TypeMeta).
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	// The option and status types of meta.k8s.io in the unversioned v1
	// that the generic handlers decode query parameters into.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	s.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	metaPkg := reflect.TypeFor[metav1.Status]().PkgPath()
	for _, g := range served {
		if err := g.add(s); err != nil {
			return nil, fmt.Errorf("scheme %s: %w", g.gv, err)
		}
		hub := schema.GroupVersion{Group: g.gv.Group, Version: runtime.APIVersionInternal}
		for kind, t := range s.KnownTypes(g.gv) {
			if t.PkgPath() == metaPkg {
				continue // meta.k8s.io's own types (options, WatchEvent)
			}
			s.AddKnownTypeWithName(hub.WithKind(kind), reflect.New(t).Interface().(runtime.Object))
		}
	}
	for kind, fields := range selectableFields {
		allowed := fields
		err := s.AddFieldLabelConversionFunc(kind, func(label, value string) (string, string, error) {
			if slices.Contains(allowed, label) {
				return label, value, nil
			}
			return "", "", fmt.Errorf("%q is not a known field selector: only %s", label, quoted(allowed))
		})
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

func quoted(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%q", s)
	}
	return out
}

// selectableFields are the field selectors each kind accepts, kube-apiserver's
// sets (pkg/registry/core/{node,pod,event}/strategy.go); other kinds take
// metadata.name and metadata.namespace, the scheme's default.
var selectableFields = map[schema.GroupVersionKind][]string{
	corev1.SchemeGroupVersion.WithKind("Node"): {"metadata.name", "spec.unschedulable"},
	corev1.SchemeGroupVersion.WithKind("Pod"): {"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
		"spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName"},
	corev1.SchemeGroupVersion.WithKind("Event"): {"metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace",
		"involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
		"involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
}

// codecs are the scheme's serializers: JSON, YAML and protobuf.
type codecs struct {
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
	params runtime.ParameterCodec
}

func newCodecs() (codecs, error) {
	s, err := newScheme()
	if err != nil {
		return codecs{}, err
	}
	return codecs{scheme: s, codecs: serializer.NewCodecFactory(s), params: runtime.NewParameterCodec(s)}, nil
}
