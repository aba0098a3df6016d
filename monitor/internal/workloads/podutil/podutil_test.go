// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package podutil

import (
	"testing"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
)

func TestOwnerKind(t *testing.T) {
	p := &podv1.Pod{Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: "p"}}
	if OwnerKind(p) != "" {
		t.Error("bare pod has an owner")
	}
	p.Metadata.OwnerReferences = []*nodev1.OwnerReference{{Kind: "Foo"}, {Kind: "DaemonSet", Controller: true}}
	if OwnerKind(p) != "DaemonSet" {
		t.Error("the controller reference must win")
	}
	p.Metadata.OwnerReferences[1].Controller = false
	if OwnerKind(p) != "Foo" {
		t.Error("without a controller reference the first one counts")
	}
}
