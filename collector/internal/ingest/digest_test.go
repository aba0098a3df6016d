// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

func digestStatus() *nodev1.NodeStatus {
	hb := timestamppb.New(time.Unix(1700000100, 0))
	since := timestamppb.New(time.Unix(1700000000, 0))
	c := func(t, s, r, m string) *nodev1.NodeCondition {
		return &nodev1.NodeCondition{Type: t, Status: s, Reason: r, Message: m, LastHeartbeatTime: hb, LastTransitionTime: since}
	}
	return &nodev1.NodeStatus{
		Capacity:    map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110"},
		Allocatable: map[string]string{"cpu": "3900m", "memory": "15Gi", "pods": "110"},
		Conditions: []*nodev1.NodeCondition{
			c("MemoryPressure", "False", "KubeletHasSufficientMemory", "ok"),
			c("DiskPressure", "False", "KubeletHasNoDiskPressure", "ok"),
			c("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses:       []*nodev1.NodeAddress{{Type: "InternalIP", Address: "10.0.0.7"}, {Type: "Hostname", Address: "n1"}},
		DaemonEndpoints: &nodev1.NodeDaemonEndpoints{ReporterEndpoint: &nodev1.DaemonEndpoint{Port: 9192}},
		NodeInfo:        &nodev1.NodeSystemInfo{MachineId: "m", BootId: "b", KernelVersion: "6.8", Architecture: "amd64"},
	}
}

func mustDigest(t *testing.T, st *nodev1.NodeStatus) statusDigest {
	t.Helper()
	d, ok := digestOf(st)
	if !ok {
		t.Fatalf("no digest for %v", st)
	}
	return d
}

// What StatusChanged ignores must not change the digest, or an unchanged
// report would cost a write.
func TestDigestIgnoresWhatStatusChangedIgnores(t *testing.T) {
	base := digestStatus()
	want := mustDigest(t, base)
	for name, mod := range map[string]func(*nodev1.NodeStatus){
		"heartbeat times": func(s *nodev1.NodeStatus) {
			for i, c := range s.Conditions {
				c.LastHeartbeatTime = timestamppb.New(time.Unix(1800000000+int64(i), 0))
			}
		},
		"no heartbeat": func(s *nodev1.NodeStatus) { s.Conditions[0].LastHeartbeatTime = nil },
		"condition order": func(s *nodev1.NodeStatus) {
			s.Conditions[0], s.Conditions[2] = s.Conditions[2], s.Conditions[0]
		},
		"quantity spelling": func(s *nodev1.NodeStatus) {
			s.Capacity["cpu"] = "4000m"
			s.Allocatable["cpu"] = "3.9"
			s.Capacity["memory"] = "16384Mi"
		},
		"same instant, other zone of representation": func(s *nodev1.NodeStatus) {
			s.Conditions[1].LastTransitionTime = timestamppb.New(time.Unix(1700000000, 0).In(time.FixedZone("x", 3600)))
		},
	} {
		s := proto.CloneOf(base)
		mod(s)
		if nodemodel.StatusChanged(base, s) {
			t.Fatalf("%s: StatusChanged says changed; the test case is wrong", name)
		}
		if got := mustDigest(t, s); got != want {
			t.Errorf("%s: digest changed; an unchanged report would be written", name)
		}
	}
}

// Every difference StatusChanged sees must change the digest, or a changed
// status would not be written.
func TestDigestAgreesWithStatusChanged(t *testing.T) {
	base := digestStatus()
	mods := map[string]func(*nodev1.NodeStatus){
		"condition status":  func(s *nodev1.NodeStatus) { s.Conditions[2].Status = "False" },
		"condition reason":  func(s *nodev1.NodeStatus) { s.Conditions[2].Reason = "X" },
		"condition message": func(s *nodev1.NodeStatus) { s.Conditions[2].Message = "y" },
		"transition time": func(s *nodev1.NodeStatus) {
			s.Conditions[2].LastTransitionTime = timestamppb.New(time.Unix(1700000000, 1))
		},
		"no transition time": func(s *nodev1.NodeStatus) { s.Conditions[2].LastTransitionTime = nil },
		"condition added": func(s *nodev1.NodeStatus) {
			s.Conditions = append(s.Conditions, &nodev1.NodeCondition{Type: "PIDPressure"})
		},
		"condition removed":   func(s *nodev1.NodeStatus) { s.Conditions = s.Conditions[:2] },
		"duplicate type":      func(s *nodev1.NodeStatus) { s.Conditions[1].Type = "MemoryPressure" },
		"capacity value":      func(s *nodev1.NodeStatus) { s.Capacity["cpu"] = "8" },
		"capacity key":        func(s *nodev1.NodeStatus) { s.Capacity["gpu"] = "1" },
		"capacity moved":      func(s *nodev1.NodeStatus) { delete(s.Capacity, "pods"); s.Allocatable["x"] = "110" },
		"allocatable value":   func(s *nodev1.NodeStatus) { s.Allocatable["memory"] = "14Gi" },
		"sub-nano quantity":   func(s *nodev1.NodeStatus) { s.Capacity["cpu"] = "4.0000000001" },
		"unparsable quantity": func(s *nodev1.NodeStatus) { s.Capacity["cpu"] = "four" },
		"address":             func(s *nodev1.NodeStatus) { s.Addresses[0].Address = "10.0.0.8" },
		"address order":       func(s *nodev1.NodeStatus) { s.Addresses[0], s.Addresses[1] = s.Addresses[1], s.Addresses[0] },
		"address removed":     func(s *nodev1.NodeStatus) { s.Addresses = s.Addresses[:1] },
		"node info":           func(s *nodev1.NodeStatus) { s.NodeInfo.BootId = "b2" },
		"no node info":        func(s *nodev1.NodeStatus) { s.NodeInfo = nil },
		"empty node info":     func(s *nodev1.NodeStatus) { s.NodeInfo = &nodev1.NodeSystemInfo{} },
		"daemon port":         func(s *nodev1.NodeStatus) { s.DaemonEndpoints.ReporterEndpoint.Port = 1 },
		"empty daemon":        func(s *nodev1.NodeStatus) { s.DaemonEndpoints.ReporterEndpoint = nil },
		"no daemon endpoints": func(s *nodev1.NodeStatus) { s.DaemonEndpoints = nil },
		"string boundary": func(s *nodev1.NodeStatus) {
			s.Conditions[2].Reason, s.Conditions[2].Message = "KubeletReadyk", "ubelet is posting ready status"
		},
		"empty status":         func(s *nodev1.NodeStatus) { proto.Reset(s) },
		"empty maps vs absent": func(s *nodev1.NodeStatus) { s.Capacity = nil },
	}
	for name, mod := range mods {
		s := proto.CloneOf(base)
		mod(s)
		if !nodemodel.StatusChanged(base, s) {
			t.Fatalf("%s: StatusChanged says unchanged; the test case is wrong", name)
		}
		if mustDigest(t, s) == mustDigest(t, base) {
			t.Errorf("%s: same digest for a changed status: it would not be written", name)
		}
	}
	if d, _ := digestOf(nil); d == mustDigest(t, &nodev1.NodeStatus{}) {
		t.Error("nil and empty status share a digest")
	}
}

// Random pairs: equal digests imply StatusChanged is false, and equal
// statuses (by StatusChanged) built from the same choices share a digest.
func TestDigestRandomPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(v ...string) string { return v[r.IntN(len(v))] }
	gen := func() *nodev1.NodeStatus {
		s := &nodev1.NodeStatus{Capacity: map[string]string{}, Allocatable: map[string]string{}}
		for _, typ := range []string{"Ready", "MemoryPressure", "DiskPressure"} {
			if r.IntN(4) == 0 {
				continue
			}
			s.Conditions = append(s.Conditions, &nodev1.NodeCondition{Type: typ, Status: pick("True", "False"), Reason: pick("", "R"),
				LastHeartbeatTime:  timestamppb.New(time.Unix(int64(r.IntN(3)), 0)),
				LastTransitionTime: timestamppb.New(time.Unix(int64(r.IntN(2)), 0))})
		}
		r.Shuffle(len(s.Conditions), func(i, j int) { s.Conditions[i], s.Conditions[j] = s.Conditions[j], s.Conditions[i] })
		for _, k := range []string{"cpu", "memory"} {
			if r.IntN(3) > 0 {
				s.Capacity[k] = pick("1", "1000m", "2", "1Ki", "1024")
			}
		}
		if r.IntN(2) == 0 {
			s.NodeInfo = &nodev1.NodeSystemInfo{BootId: pick("", "a")}
		}
		return s
	}
	same, diff := 0, 0
	for range 20000 {
		a, b := gen(), gen()
		changed := nodemodel.StatusChanged(a, b)
		eq := mustDigest(t, a) == mustDigest(t, b)
		if eq && changed {
			t.Fatalf("equal digests for changed statuses:\n%v\n%v", a, b)
		}
		if !changed && !eq {
			t.Fatalf("unchanged statuses with different digests (an extra write):\n%v\n%v", a, b)
		}
		if changed {
			diff++
		} else {
			same++
		}
	}
	if same == 0 || diff == 0 {
		t.Fatalf("generator covers too little: %d same, %d different", same, diff)
	}
}
