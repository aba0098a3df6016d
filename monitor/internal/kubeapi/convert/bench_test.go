// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package convert

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

func benchNode() *nodev1.Node {
	at := timestamppb.New(time.Now())
	return &nodev1.Node{
		Metadata: &nodev1.ObjectMeta{Name: "node-000001", Uid: "u", Labels: map[string]string{"kubernetes.io/hostname": "node-000001", "topology.kubernetes.io/zone": "z1"}, CreationTimestamp: at, ResourceVersion: "7"},
		Spec:     &nodev1.NodeSpec{},
		Status: &nodev1.NodeStatus{Capacity: map[string]string{"cpu": "8", "memory": "32Gi", "pods": "110"},
			Conditions: []*nodev1.NodeCondition{{Type: "Ready", Status: "True", LastHeartbeatTime: at, LastTransitionTime: at, Reason: "KubeletReady"}},
			Addresses:  []*nodev1.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}},
			NodeInfo:   &nodev1.NodeSystemInfo{ReporterVersion: "v1", OsImage: "Debian GNU/Linux 12", KernelVersion: "6.1.0", OperatingSystem: "linux", Architecture: "amd64"}},
	}
}

func BenchmarkNodeFast(b *testing.B) {
	n := benchNode()
	b.ReportAllocs()
	for b.Loop() {
		_ = fastNode(n)
	}
}

func BenchmarkNodeGeneric(b *testing.B) {
	n := benchNode()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := genericNode(n); err != nil {
			b.Fatal(err)
		}
	}
}
