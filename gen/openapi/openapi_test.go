// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package openapi_test

import (
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/nodepulse/nodepulse/gen/openapi"
)

func ref(p string) spec.Ref { return spec.MustCreateRef("#/definitions/" + p) }

// The k8s.io/api and k8s.io/apimachinery types carry OpenAPIModelName methods,
// so openapi-gen keys their definitions by the names a kube-apiserver serves
// ("io.k8s.api.core.v1.Node"), not by Go import path ("k8s.io/api/core/v1.Node").
func TestDefinitions(t *testing.T) {
	defs := openapi.GetOpenAPIDefinitions(ref)
	for _, name := range []string{
		"io.k8s.api.core.v1.Node",
		"io.k8s.api.core.v1.Pod",
		"io.k8s.api.coordination.v1.Lease",
		"io.k8s.api.policy.v1.Eviction",
		"io.k8s.api.authorization.v1.SelfSubjectAccessReview",
		"io.k8s.api.authentication.v1.SelfSubjectReview",
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
	} {
		if _, ok := defs[name]; !ok {
			t.Errorf("no definition for %s", name)
		}
	}

	node := defs["io.k8s.api.core.v1.Node"]
	specProp, ok := node.Schema.Properties["spec"]
	if !ok {
		t.Fatalf("Node schema has no spec property; properties: %v", keys(node.Schema.Properties))
	}
	if specProp.Description == "" {
		t.Errorf("Node spec property has an empty description")
	}
	if got, want := specProp.Ref.String(), "#/definitions/io.k8s.api.core.v1.NodeSpec"; got != want {
		t.Errorf("Node spec ref = %q, want %q", got, want)
	}
}

// Every definition's dependencies are generated too, so a spec built from the
// map has no dangling $ref.
func TestDependenciesDefined(t *testing.T) {
	defs := openapi.GetOpenAPIDefinitions(ref)
	for name, def := range defs {
		for _, dep := range def.Dependencies {
			if _, ok := defs[dep]; !ok {
				t.Errorf("%s depends on %s, which has no definition", name, dep)
			}
		}
	}
}

func keys(m map[string]spec.Schema) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
