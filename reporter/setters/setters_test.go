// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package setters

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/reporter/probe"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

var (
	t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 = t0.Add(10 * time.Second)
)

func host() *probe.Snapshot {
	return &probe.Snapshot{
		NumCPU: 4, MemTotalBytes: 16 << 30, MemAvailableBytes: 8 << 30,
		NodeFS: probe.FS{CapacityBytes: 100 << 30, AvailableBytes: 50 << 30, Inodes: 1000, InodesFree: 500},
		PIDMax: 32768, Processes: 200,
		KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12", MachineID: "m1", SystemUUID: "u1", BootID: "b1",
	}
}

func cfg(t *testing.T) *Config {
	th, err := ParseThresholds(DefaultEvictionHard)
	if err != nil {
		t.Fatal(err)
	}
	return &Config{NodeName: "n1", MaxPods: 110, EvictionHard: th, ReporterVersion: "v1", ReporterPort: 9192, LocalStorageIsolation: true}
}

func inputs() Inputs { return Inputs{Host: host(), NodeIP: net.ParseIP("10.0.0.1")} }

func cond(t *testing.T, st *nodev1.NodeStatus, typ string) *nodev1.NodeCondition {
	t.Helper()
	c := nodemodel.FindCondition(st.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition in %v", typ, st.Conditions)
	}
	return c
}

func types(st *nodev1.NodeStatus) string {
	var s []string
	for _, c := range st.Conditions {
		s = append(s, c.Type)
	}
	return strings.Join(s, ",")
}

func TestFirstSight(t *testing.T) {
	r := Apply(t0, cfg(t), inputs(), nil)
	if got, want := types(r.Status), "MemoryPressure,DiskPressure,PIDPressure,Ready"; got != want {
		t.Fatalf("condition order %s, want %s", got, want)
	}
	want := map[string][3]string{
		nodemodel.MemoryPressure: {"False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
		nodemodel.DiskPressure:   {"False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
		nodemodel.PIDPressure:    {"False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
		nodemodel.Ready:          {"True", "KubeletReady", "kubelet is posting ready status"},
	}
	for typ, w := range want {
		c := cond(t, r.Status, typ)
		if c.Status != w[0] || c.Reason != w[1] || c.Message != w[2] {
			t.Errorf("%s = %s/%s/%q, want %v", typ, c.Status, c.Reason, c.Message, w)
		}
		if !c.LastTransitionTime.AsTime().Equal(t0) || !c.LastHeartbeatTime.AsTime().Equal(t0) {
			t.Errorf("%s times = %v/%v, want both %v", typ, c.LastTransitionTime.AsTime(), c.LastHeartbeatTime.AsTime(), t0)
		}
	}
	// Three pressure events (brand-new conditions get one), none for the
	// first Ready (spec §5.4).
	var reasons []string
	for _, e := range r.Events {
		reasons = append(reasons, e.Reason)
	}
	if got := strings.Join(reasons, ","); got != "NodeHasSufficientMemory,NodeHasNoDiskPressure,NodeHasSufficientPID" {
		t.Errorf("events %s", got)
	}
	if len(r.Errs) != 0 {
		t.Errorf("errs %v", r.Errs)
	}
	if a := r.Status.Addresses; len(a) != 2 || a[0].Type != "InternalIP" || a[0].Address != "10.0.0.1" || a[1].Type != "Hostname" || a[1].Address != "n1" {
		t.Errorf("addresses %v", a)
	}
}

func TestNoChangeKeepsTransitionAdvancesHeartbeat(t *testing.T) {
	c := cfg(t)
	first := Apply(t0, c, inputs(), nil).Status
	r := Apply(t1, c, inputs(), first)
	for _, cd := range r.Status.Conditions {
		if !cd.LastTransitionTime.AsTime().Equal(t0) {
			t.Errorf("%s transition moved to %v", cd.Type, cd.LastTransitionTime.AsTime())
		}
		if !cd.LastHeartbeatTime.AsTime().Equal(t1) {
			t.Errorf("%s heartbeat %v, want %v", cd.Type, cd.LastHeartbeatTime.AsTime(), t1)
		}
	}
	if len(r.Events) != 0 {
		t.Errorf("events on no change: %v", r.Events)
	}
	if nodemodel.StatusChanged(first, r.Status) {
		t.Error("StatusChanged true when only heartbeats moved")
	}
	if nodemodel.FindCondition(first.Conditions, nodemodel.Ready).LastHeartbeatTime.AsTime() != t0 {
		t.Error("Apply modified its input")
	}
}

func TestPressureFlipAndBack(t *testing.T) {
	c := cfg(t)
	tests := []struct {
		typ       string
		set       func(*PressureFlags)
		trueWhy   string
		trueEvent string
	}{
		{nodemodel.MemoryPressure, func(p *PressureFlags) { p.Memory = true }, "KubeletHasInsufficientMemory", "NodeHasInsufficientMemory"},
		{nodemodel.DiskPressure, func(p *PressureFlags) { p.Disk = true }, "KubeletHasDiskPressure", "NodeHasDiskPressure"},
		{nodemodel.PIDPressure, func(p *PressureFlags) { p.PID = true }, "KubeletHasInsufficientPID", "NodeHasInsufficientPID"},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			s0 := Apply(t0, c, inputs(), nil).Status
			in := inputs()
			tc.set(&in.Pressure)
			r1 := Apply(t1, c, in, s0)
			c1 := cond(t, r1.Status, tc.typ)
			if c1.Status != "True" || c1.Reason != tc.trueWhy || !c1.LastTransitionTime.AsTime().Equal(t1) {
				t.Fatalf("flip: %v", c1)
			}
			if len(r1.Events) != 1 || r1.Events[0].Reason != tc.trueEvent || r1.Events[0].Message != "Node n1 status is now: "+tc.trueEvent {
				t.Errorf("events %v", r1.Events)
			}
			if !nodemodel.StatusChanged(s0, r1.Status) {
				t.Error("flip not seen as a change")
			}
			// Pressure does not make the node NotReady.
			if cond(t, r1.Status, nodemodel.Ready).Status != "True" {
				t.Error("Ready changed with pressure")
			}
			t2 := t1.Add(time.Minute)
			r2 := Apply(t2, c, inputs(), r1.Status)
			c2 := cond(t, r2.Status, tc.typ)
			if c2.Status != "False" || !c2.LastTransitionTime.AsTime().Equal(t2) {
				t.Errorf("flip back: %v", c2)
			}
		})
	}
}

func TestLegacyReasonKept(t *testing.T) {
	old := &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{
		Type: nodemodel.MemoryPressure, Status: "False", Reason: "OldReason", Message: "old",
		LastTransitionTime: nodemodel.Timestamp(t0)}}}
	r := Apply(t1, cfg(t), inputs(), old)
	c := cond(t, r.Status, nodemodel.MemoryPressure)
	if c.Reason != "OldReason" || c.Message != "old" || !c.LastTransitionTime.AsTime().Equal(t0) {
		t.Errorf("unchanged status must keep stored reason/message/transition: %v", c)
	}
}

func TestReady(t *testing.T) {
	e1, e2 := errors.New("container runtime is down"), errors.New("network state unknown")
	tests := []struct {
		name    string
		mod     func(*Inputs)
		status  string
		reason  string
		message string
	}{
		{"ok", func(*Inputs) {}, "True", "KubeletReady", "kubelet is posting ready status"},
		{"one error", func(in *Inputs) { in.RuntimeErrs = []error{e1} }, "False", "KubeletNotReady", "container runtime is down"},
		{"two errors, runtime first", func(in *Inputs) { in.NetworkErrs = []error{e2}; in.RuntimeErrs = []error{e1} },
			"False", "KubeletNotReady", "[container runtime is down, network state unknown]"},
		{"missing capacity", func(in *Inputs) { in.Host.FSErr = errors.New("statfs") },
			"False", "KubeletNotReady", "missing node capacity for resources: ephemeral-storage"},
		{"shutdown and missing", func(in *Inputs) {
			in.Host.FSErr = errors.New("x")
			in.ShutdownErrs = []error{errors.New("node is shutting down")}
		},
			"False", "KubeletNotReady", "[node is shutting down, missing node capacity for resources: ephemeral-storage]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg(t)
			s0 := Apply(t0, c, inputs(), nil).Status // Ready=True at t0
			in := inputs()
			tc.mod(&in)
			r := Apply(t1, c, in, s0)
			rd := cond(t, r.Status, nodemodel.Ready)
			if rd.Status != tc.status || rd.Reason != tc.reason || rd.Message != tc.message {
				t.Fatalf("Ready = %s/%s/%q, want %s/%s/%q", rd.Status, rd.Reason, rd.Message, tc.status, tc.reason, tc.message)
			}
			wantTransition, wantEvents := t0, 0
			if tc.status != "True" {
				wantTransition, wantEvents = t1, 1
			}
			if !rd.LastTransitionTime.AsTime().Equal(wantTransition) {
				t.Errorf("transition %v, want %v", rd.LastTransitionTime.AsTime(), wantTransition)
			}
			if len(r.Events) != wantEvents || (wantEvents == 1 && r.Events[0].Reason != "NodeNotReady") {
				t.Errorf("events %v", r.Events)
			}
			if types(r.Status)[len(types(r.Status))-5:] != "Ready" {
				t.Errorf("Ready not last: %s", types(r.Status))
			}
		})
	}
}

func TestReadyKeptLast(t *testing.T) {
	// A control plane that knows Ready and NetworkUnavailable but not the
	// pressure conditions: the new ones are appended, Ready moves last.
	old := &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{
		{Type: nodemodel.Ready, Status: "Unknown", Reason: nodemodel.ReasonNodeStatusUnknown, LastTransitionTime: nodemodel.Timestamp(t0)},
		{Type: nodemodel.NetworkUnavailable, Status: "False", LastTransitionTime: nodemodel.Timestamp(t0)},
	}}
	r := Apply(t1, cfg(t), inputs(), old)
	if got, want := types(r.Status), "NetworkUnavailable,MemoryPressure,DiskPressure,PIDPressure,Ready"; got != want {
		t.Errorf("order %s, want %s", got, want)
	}
	rd := cond(t, r.Status, nodemodel.Ready)
	if rd.Status != "True" || !rd.LastTransitionTime.AsTime().Equal(t1) {
		t.Errorf("Unknown→True must transition now: %v", rd)
	}
	if r.Events[len(r.Events)-1].Reason != "NodeReady" {
		t.Errorf("want NodeReady event, got %v", r.Events)
	}
	if nu := cond(t, r.Status, nodemodel.NetworkUnavailable); nu.LastHeartbeatTime != nil {
		t.Error("the reporter must not touch NetworkUnavailable")
	}
}

func TestPressureFromProbeNumbers(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*probe.Snapshot)
		th   string
		want PressureFlags
	}{
		{"healthy", func(*probe.Snapshot) {}, DefaultEvictionHard, PressureFlags{}},
		{"memory below 100Mi", func(h *probe.Snapshot) { h.MemAvailableBytes = 99 << 20 }, DefaultEvictionHard, PressureFlags{Memory: true}},
		{"memory exactly 100Mi", func(h *probe.Snapshot) { h.MemAvailableBytes = 100 << 20 }, DefaultEvictionHard, PressureFlags{}},
		{"nodefs below 10%", func(h *probe.Snapshot) { h.NodeFS.AvailableBytes = 9 << 30 }, "nodefs.available<10%", PressureFlags{Disk: true}},
		{"imagefs below 15% by default", func(h *probe.Snapshot) { h.NodeFS.AvailableBytes = 14 << 30 }, DefaultEvictionHard, PressureFlags{Disk: true}},
		{"inodes below 5%", func(h *probe.Snapshot) { h.NodeFS.InodesFree = 49 }, DefaultEvictionHard, PressureFlags{Disk: true}},
		{"no default pid threshold", func(h *probe.Snapshot) { h.Processes = 32767 }, DefaultEvictionHard, PressureFlags{}},
		{"pid threshold set", func(h *probe.Snapshot) { h.Processes = 32000 }, "pid.available<10%", PressureFlags{PID: true}},
		{"setting one key zeroes the others", func(h *probe.Snapshot) { h.MemAvailableBytes = 1 }, "pid.available<10%", PressureFlags{}},
		{"unknown memory is no pressure", func(h *probe.Snapshot) { h.MachineErr = errors.New("x"); h.MemAvailableBytes = 0 }, DefaultEvictionHard, PressureFlags{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			th, err := ParseThresholds(tc.th)
			if err != nil {
				t.Fatal(err)
			}
			h := host()
			tc.mod(h)
			if got := Pressure(t0, th, h, nil); got != tc.want {
				t.Errorf("Pressure = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPressureHold(t *testing.T) {
	h := &PressureHold{Period: 5 * time.Minute}
	if !h.Observe(t0, "M", true) {
		t.Fatal("crossed must be pressure")
	}
	if !h.Observe(t0.Add(4*time.Minute), "M", false) {
		t.Error("within hold-down must still be pressure")
	}
	if h.Observe(t0.Add(5*time.Minute), "M", false) {
		t.Error("after hold-down must clear")
	}
}

func TestAllocatable(t *testing.T) {
	c := cfg(t)
	c.KubeReserved = map[string]resource.Quantity{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("1Gi")}
	c.SystemReserved = map[string]resource.Quantity{"cpu": resource.MustParse("500m"), "ephemeral-storage": resource.MustParse("10Gi")}
	in := inputs()
	in.Host.HugePages = map[int64]int64{2 << 20: 1 << 30}
	r := Apply(t0, c, in, nil)
	wantCap := map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi", "hugepages-2Mi": "1Gi"}
	// memory: 16Gi - 1Gi kube - 100Mi eviction - 1Gi hugepages; storage:
	// 100Gi - 10Gi reserved - 10% eviction.
	wantAlloc := map[string]string{"cpu": "3", "memory": resource.NewQuantity(16<<30-1<<30-100<<20-1<<30, resource.BinarySI).String(), "pods": "110", "ephemeral-storage": "80Gi", "hugepages-2Mi": "1Gi"}
	for k, v := range wantCap {
		if r.Status.Capacity[k] != v {
			t.Errorf("capacity[%s] = %s, want %s", k, r.Status.Capacity[k], v)
		}
	}
	for k, v := range wantAlloc {
		if r.Status.Allocatable[k] != v {
			t.Errorf("allocatable[%s] = %s, want %s", k, r.Status.Allocatable[k], v)
		}
	}
	// Floor at zero.
	c.KubeReserved = map[string]resource.Quantity{"cpu": resource.MustParse("64")}
	if got := Apply(t0, c, inputs(), nil).Status.Allocatable["cpu"]; got != "0" {
		t.Errorf("over-reserved cpu = %s, want 0", got)
	}
}

func TestMachineInfoErrorAndReboot(t *testing.T) {
	c := cfg(t)
	in := inputs()
	in.Host.MachineErr = errors.New("meminfo unreadable")
	r := Apply(t0, c, in, nil)
	if r.Status.Capacity["cpu"] != "0" || r.Status.Capacity["memory"] != "0" || r.Status.Capacity["pods"] != "110" {
		t.Errorf("capacity on machine error: %v", r.Status.Capacity)
	}
	if len(r.Errs) == 0 {
		t.Error("machine error not reported")
	}
	old := Apply(t0, c, inputs(), nil).Status
	in = inputs()
	in.Host.BootID = "b2"
	r = Apply(t1, c, in, old)
	found := false
	for _, e := range r.Events {
		if e.Type == EventWarning && e.Reason == "NodeRebooted" && e.Message == "Node n1 has been rebooted, boot id: b2" {
			found = true
		}
	}
	if !found {
		t.Errorf("no NodeRebooted event: %v", r.Events)
	}
}

// TestUnreadableInfoKeepsPreviousValues: upstream's VersionInfo and
// MachineInfo setters return their error before they set anything, so a
// node whose host information cannot be read keeps what it had (spec §5.2).
// Clearing it would also make an unchanged node's status "changed" twice.
func TestUnreadableInfoKeepsPreviousValues(t *testing.T) {
	c := cfg(t)
	old := Apply(t0, c, inputs(), nil).Status
	for _, tc := range []struct {
		name string
		in   Inputs
	}{
		{"every identity read failed", func() Inputs {
			in := inputs()
			h := in.Host
			h.KernelVersion, h.OSImage, h.MachineID, h.SystemUUID, h.BootID = "", "", "", "", ""
			h.InfoErrs = []error{errors.New("kernel version: unreadable"), errors.New("os image: unreadable")}
			return in
		}()},
		{"no host reading at all", Inputs{NodeIP: net.ParseIP("10.0.0.1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Apply(t1, c, tc.in, old)
			ni := r.Status.GetNodeInfo()
			if ni.GetKernelVersion() != "6.1.0" || ni.GetOsImage() != "Debian GNU/Linux 12" ||
				ni.GetMachineId() != "m1" || ni.GetSystemUuid() != "u1" || ni.GetBootId() != "b1" {
				t.Errorf("nodeInfo after an unreadable host: %v, want the previous values", ni)
			}
			for _, e := range r.Events {
				if e.Reason == "NodeRebooted" {
					t.Errorf("an unreadable boot id is no reboot: %v", e)
				}
			}
		})
	}
	// One field read again, one still unreadable: the read one moves.
	in := inputs()
	in.Host.KernelVersion, in.Host.OSImage = "6.2.0", ""
	ni := Apply(t1, c, in, old).Status.GetNodeInfo()
	if ni.GetKernelVersion() != "6.2.0" || ni.GetOsImage() != "Debian GNU/Linux 12" {
		t.Errorf("kernel %q, OS image %q: want the new kernel and the old OS image", ni.GetKernelVersion(), ni.GetOsImage())
	}
}

func TestAddressErrorKeepsOldAddresses(t *testing.T) {
	c := cfg(t)
	old := Apply(t0, c, inputs(), nil).Status
	in := inputs()
	in.NodeIP, in.AddressErr = nil, errors.New("can't get ip address of node n1")
	r := Apply(t1, c, in, old)
	if len(r.Status.Addresses) != 2 || r.Status.Addresses[0].Address != "10.0.0.1" {
		t.Errorf("addresses %v", r.Status.Addresses)
	}
	if len(r.Errs) != 1 {
		t.Errorf("errs %v", r.Errs)
	}
	if cond(t, r.Status, nodemodel.Ready).Status != "True" {
		t.Error("an address error must not fail Ready")
	}
}

func TestParseThresholds(t *testing.T) {
	th, err := ParseThresholds(DefaultEvictionHard)
	if err != nil {
		t.Fatal(err)
	}
	if got := th.String(); got != "imagefs.available<15%,imagefs.inodesFree<5%,memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%" {
		t.Errorf("String = %s", got)
	}
	for _, bad := range []string{"memory.available>1Gi", "foo.available<1", "memory.available<abc", "nodefs.available<0%", "nodefs.available<101%", "memory.available<1,memory.available<2"} {
		if _, err := ParseThresholds(bad); err == nil {
			t.Errorf("%q: want error", bad)
		}
	}
	if th, err := ParseThresholds(""); err != nil || len(th) != 0 {
		t.Errorf("empty: %v %v", th, err)
	}
}
