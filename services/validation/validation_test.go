// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package validation

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// check asserts that err is nil when wantField is "", and otherwise that
// Status(err) is InvalidArgument and its message starts with wantField.
func check(t *testing.T, name string, err error, wantField string) {
	t.Helper()
	if wantField == "" {
		if err != nil {
			t.Errorf("%s: unexpected error: %v", name, err)
		}
		return
	}
	if err == nil {
		t.Errorf("%s: accepted, want refusal of %s", name, wantField)
		return
	}
	st, ok := status.FromError(Status(err))
	if !ok || st.Code() != codes.InvalidArgument {
		t.Errorf("%s: code %v, want InvalidArgument", name, st.Code())
	}
	if !strings.HasPrefix(st.Message(), wantField+": ") {
		t.Errorf("%s: message %q does not name field %q first", name, st.Message(), wantField)
	}
	if fe := First(err); fe == nil || fe.Field != wantField {
		t.Errorf("%s: First = %+v, want field %q", name, fe, wantField)
	}
}

func asErr(e *FieldError) error {
	if e == nil {
		return nil
	}
	return e
}

func TestNodeName(t *testing.T) {
	cases := []struct{ in, field string }{
		{"node-1", ""},
		{"node-1.zone-a.example.com", ""},
		{"a", ""},
		{strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61), ""},
		{"", "name"},
		{"Node-1", "name"},
		{"-node", "name"},
		{"node-", "name"},
		{"node_1", "name"},
		{"node..a", "name"},
		{"node/1", "name"},
		{strings.Repeat("a", 64), "name"},
		{strings.Repeat("a.", 127) + "a", "name"}, // 255 characters
	}
	for _, c := range cases {
		check(t, "NodeName("+truncate(c.in)+")", asErr(NodeName("name", c.in)), c.field)
	}
}

func TestLabels(t *testing.T) {
	cases := []struct {
		name   string
		labels map[string]string
		field  string
	}{
		{"well-known", map[string]string{"kubernetes.io/hostname": "node-1", "topology.kubernetes.io/zone": "eu-1a"}, ""},
		{"empty value", map[string]string{"role": ""}, ""},
		{"underscore and dot", map[string]string{"My_key.v1": "Value_1.x"}, ""},
		{"max name 63", map[string]string{strings.Repeat("k", 63): "v"}, ""},
		{"name 64", map[string]string{strings.Repeat("k", 64): "v"}, "l[" + strings.Repeat("k", 64) + "]"},
		{"empty key", map[string]string{"": "v"}, "l[]"},
		{"bad prefix", map[string]string{"Example.com/k": "v"}, "l[Example.com/k]"},
		{"empty prefix", map[string]string{"/k": "v"}, "l[/k]"},
		{"empty name", map[string]string{"example.com/": "v"}, "l[example.com/]"},
		{"two slashes", map[string]string{"a/b/c": "v"}, "l[a/b/c]"},
		{"key starts with dash", map[string]string{"-k": "v"}, "l[-k]"},
		{"value 64", map[string]string{"k": strings.Repeat("v", 64)}, "l[k]"},
		{"value with space", map[string]string{"k": "a b"}, "l[k]"},
		{"value ends with dash", map[string]string{"k": "a-"}, "l[k]"},
	}
	for _, c := range cases {
		check(t, "Labels/"+c.name, Labels("l", c.labels, 8).Err(), c.field)
	}
	many := map[string]string{}
	for i := range 9 {
		many["k"+string(rune('a'+i))] = "v"
	}
	check(t, "Labels/too many", Labels("l", many, 8).Err(), "l")
}

func TestTaints(t *testing.T) {
	lim := DefaultLimits()
	taint := func(k, v, e string) *nodev1.Taint { return &nodev1.Taint{Key: k, Value: v, Effect: e} }
	cases := []struct {
		name   string
		taints []*nodev1.Taint
		field  string
	}{
		{"valid", []*nodev1.Taint{taint("dedicated", "gpu", "NoSchedule"), taint("node.kubernetes.io/not-ready", "", "NoExecute")}, ""},
		{"same key other effect", []*nodev1.Taint{taint("k", "", "NoSchedule"), taint("k", "", "NoExecute")}, ""},
		{"prefer", []*nodev1.Taint{taint("k", "", "PreferNoSchedule")}, ""},
		{"empty key", []*nodev1.Taint{taint("", "v", "NoSchedule")}, "t[0].key"},
		{"bad key", []*nodev1.Taint{taint("bad key", "", "NoSchedule")}, "t[0].key"},
		{"bad value", []*nodev1.Taint{taint("k", "bad value", "NoSchedule")}, "t[0].value"},
		{"no effect", []*nodev1.Taint{taint("k", "", "")}, "t[0].effect"},
		{"unknown effect", []*nodev1.Taint{taint("k", "", "NoScheduleX")}, "t[0].effect"},
		{"duplicate", []*nodev1.Taint{taint("k", "a", "NoSchedule"), taint("k", "b", "NoSchedule")}, "t[1]"},
		{"timeAdded an hour ahead", []*nodev1.Taint{{Key: "k", Effect: "NoExecute", TimeAdded: ts(now.Add(time.Hour))}}, ""},
		{"timeAdded before 1970", []*nodev1.Taint{{Key: "k", Effect: "NoExecute", TimeAdded: ts(time.Unix(-1, 0))}}, "t[0].timeAdded"},
		{"null", []*nodev1.Taint{nil}, "t[0]"},
	}
	for _, c := range cases {
		check(t, "Taints/"+c.name, Taints("t", c.taints, now, lim).Err(), c.field)
	}
	lim.MaxTaints = 1
	check(t, "Taints/too many", Taints("t", []*nodev1.Taint{taint("a", "", "NoSchedule"), taint("b", "", "NoSchedule")}, now, lim).Err(), "t")
}

func TestTolerations(t *testing.T) {
	secs := int64(300)
	cases := []struct {
		name string
		tol  *nodev1.Toleration
		f    string
	}{
		{"equal default", &nodev1.Toleration{Key: "k", Value: "v"}, ""},
		{"equal explicit", &nodev1.Toleration{Key: "k", Operator: "Equal", Value: "v", Effect: "NoSchedule"}, ""},
		{"exists any key", &nodev1.Toleration{Operator: "Exists"}, ""},
		{"exists with key", &nodev1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &secs}, ""},
		{"gt", &nodev1.Toleration{Key: "k", Operator: "Gt", Value: "10"}, ""},
		{"lt negative", &nodev1.Toleration{Key: "k", Operator: "Lt", Value: "-5"}, ""},
		{"unknown operator", &nodev1.Toleration{Key: "k", Operator: "In"}, "t.operator"},
		{"empty key with equal", &nodev1.Toleration{Value: "v"}, "t.key"},
		{"bad key", &nodev1.Toleration{Key: "a b", Operator: "Exists"}, "t.key"},
		{"exists with value", &nodev1.Toleration{Key: "k", Operator: "Exists", Value: "v"}, "t.value"},
		{"gt not integer", &nodev1.Toleration{Key: "k", Operator: "Gt", Value: "1.5"}, "t.value"},
		{"gt leading zero", &nodev1.Toleration{Key: "k", Operator: "Gt", Value: "010"}, "t.value"},
		{"lt plus sign", &nodev1.Toleration{Key: "k", Operator: "Lt", Value: "+1"}, "t.value"},
		{"lt empty", &nodev1.Toleration{Key: "k", Operator: "Lt"}, "t.value"},
		{"equal bad value", &nodev1.Toleration{Key: "k", Value: "a b"}, "t.value"},
		{"bad effect", &nodev1.Toleration{Key: "k", Operator: "Exists", Effect: "Evict"}, "t.effect"},
		{"seconds without NoExecute", &nodev1.Toleration{Key: "k", Operator: "Exists", Effect: "NoSchedule", TolerationSeconds: &secs}, "t.tolerationSeconds"},
		{"null", nil, "t"},
	}
	for _, c := range cases {
		check(t, "Toleration/"+c.name, Toleration("t", c.tol).Err(), c.f)
	}
	lim := DefaultLimits()
	lim.MaxTolerations = 1
	check(t, "Tolerations/too many", Tolerations("t", []*nodev1.Toleration{{Operator: "Exists"}, {Operator: "Exists"}}, lim).Err(), "t")
	check(t, "Tolerations/index", Tolerations("t", []*nodev1.Toleration{{Operator: "Exists"}, {Operator: "Bad"}}, DefaultLimits()).Err(), "t[1].operator")
}

func TestConditions(t *testing.T) {
	lim := DefaultLimits()
	cond := func(typ, st string) *nodev1.NodeCondition {
		return &nodev1.NodeCondition{Type: typ, Status: st, Reason: "KubeletReady", LastHeartbeatTime: ts(now), LastTransitionTime: ts(now.Add(-time.Hour))}
	}
	cases := []struct {
		name  string
		conds []*nodev1.NodeCondition
		field string
	}{
		{"standard", []*nodev1.NodeCondition{cond("MemoryPressure", "False"), cond("DiskPressure", "False"), cond("PIDPressure", "False"), cond("Ready", "True")}, ""},
		{"custom type, unknown status", []*nodev1.NodeCondition{cond("example.com/GPUHealthy", "Unknown")}, ""},
		{"skew allowed", []*nodev1.NodeCondition{{Type: "Ready", Status: "True", LastHeartbeatTime: ts(now.Add(30 * time.Second))}}, ""},
		{"empty type", []*nodev1.NodeCondition{cond("", "True")}, "c[0].type"},
		{"bad type", []*nodev1.NodeCondition{cond("Ready!", "True")}, "c[0].type"},
		{"bad status", []*nodev1.NodeCondition{cond("Ready", "true")}, "c[0].status"},
		{"empty status", []*nodev1.NodeCondition{cond("Ready", "")}, "c[0].status"},
		{"duplicate", []*nodev1.NodeCondition{cond("Ready", "True"), cond("Ready", "False")}, "c[1].type"},
		{"long reason", []*nodev1.NodeCondition{{Type: "Ready", Status: "True", Reason: strings.Repeat("R", 1025)}}, "c[0].reason"},
		{"long message", []*nodev1.NodeCondition{{Type: "Ready", Status: "True", Message: strings.Repeat("m", 4097)}}, "c[0].message"},
		{"heartbeat ahead", []*nodev1.NodeCondition{{Type: "Ready", Status: "True", LastHeartbeatTime: ts(now.Add(2 * time.Minute))}}, ""},
		{"transition ahead", []*nodev1.NodeCondition{{Type: "Ready", Status: "True", LastTransitionTime: ts(now.Add(24 * time.Hour))}}, ""},
		{"heartbeat before 1970", []*nodev1.NodeCondition{{Type: "Ready", Status: "True", LastHeartbeatTime: ts(time.Unix(-1, 0))}}, "c[0].lastHeartbeatTime"},
		{"transition invalid", []*nodev1.NodeCondition{{Type: "Ready", Status: "True", LastTransitionTime: &timestamppb.Timestamp{Seconds: 1, Nanos: -1}}}, "c[0].lastTransitionTime"},
		{"invalid timestamp", []*nodev1.NodeCondition{{Type: "Ready", Status: "True", LastTransitionTime: &timestamppb.Timestamp{Seconds: 1, Nanos: -1}}}, "c[0].lastTransitionTime"},
		{"null", []*nodev1.NodeCondition{nil}, "c[0]"},
	}
	for _, c := range cases {
		check(t, "Conditions/"+c.name, Conditions("c", c.conds, now, lim).Err(), c.field)
	}
	lim.MaxConditions = 1
	check(t, "Conditions/too many", Conditions("c", []*nodev1.NodeCondition{cond("A", "True"), cond("B", "True")}, now, lim).Err(), "c")
}

func TestResources(t *testing.T) {
	lim := DefaultLimits()
	cases := []struct {
		name  string
		res   map[string]string
		field string
	}{
		{"typical", map[string]string{"cpu": "4", "memory": "16318080Ki", "pods": "110", "ephemeral-storage": "101430960Ki", "hugepages-2Mi": "0"}, ""},
		{"millicores and extended", map[string]string{"cpu": "3500m", "nvidia.com/gpu": "8"}, ""},
		{"exponent", map[string]string{"memory": "1e9"}, ""},
		{"at bound", map[string]string{"cpu": "1M", "memory": "1Ei"}, ""},
		{"not a quantity", map[string]string{"cpu": "four"}, "r[cpu]"},
		{"negative", map[string]string{"memory": "-1Gi"}, "r[memory]"},
		{"absurd cpu", map[string]string{"cpu": "2M"}, "r[cpu]"},
		{"absurd memory", map[string]string{"memory": "2Ei"}, "r[memory]"},
		{"absurd pods", map[string]string{"pods": "1000001"}, "r[pods]"},
		{"absurd device", map[string]string{"example.com/dev": "2T"}, "r[example.com/dev]"},
		{"huge exponent", map[string]string{"cpu": "1e999999"}, "r[cpu]"},
		{"bad resource name", map[string]string{"cpu cores": "1"}, "r[cpu cores]"},
		{"empty", map[string]string{"memory": ""}, "r[memory]"},
	}
	for _, c := range cases {
		check(t, "Resources/"+c.name, Resources("r", c.res, lim).Err(), c.field)
	}
	lim.MaxResources = 1
	check(t, "Resources/too many", Resources("r", map[string]string{"cpu": "1", "pods": "1"}, lim).Err(), "r")
}

func TestAddresses(t *testing.T) {
	lim := DefaultLimits()
	addr := func(typ, a string) *nodev1.NodeAddress { return &nodev1.NodeAddress{Type: typ, Address: a} }
	cases := []struct {
		name  string
		addrs []*nodev1.NodeAddress
		field string
	}{
		{"typical", []*nodev1.NodeAddress{addr("InternalIP", "10.0.0.5"), addr("InternalIP", "fd00::5"), addr("Hostname", "node-1"), addr("ExternalDNS", "node-1.example.com"), addr("ExternalIP", "203.0.113.9"), addr("InternalDNS", "node-1.internal")}, ""},
		{"ip not ip", []*nodev1.NodeAddress{addr("InternalIP", "node-1")}, "a[0].address"},
		{"ip with zone", []*nodev1.NodeAddress{addr("ExternalIP", "fe80::1%eth0")}, "a[0].address"},
		{"ip with port", []*nodev1.NodeAddress{addr("InternalIP", "10.0.0.5:80")}, "a[0].address"},
		{"dns not dns", []*nodev1.NodeAddress{addr("InternalDNS", "Node_1")}, "a[0].address"},
		{"hostname empty", []*nodev1.NodeAddress{addr("Hostname", "")}, "a[0].address"},
		{"unknown type", []*nodev1.NodeAddress{addr("PodIP", "10.0.0.5")}, "a[0].type"},
		{"duplicate", []*nodev1.NodeAddress{addr("InternalIP", "10.0.0.5"), addr("InternalIP", "10.0.0.5")}, "a[1]"},
		{"null", []*nodev1.NodeAddress{nil}, "a[0]"},
	}
	for _, c := range cases {
		check(t, "Addresses/"+c.name, Addresses("a", c.addrs, lim).Err(), c.field)
	}
	lim.MaxAddresses = 1
	check(t, "Addresses/too many", Addresses("a", []*nodev1.NodeAddress{addr("Hostname", "a"), addr("Hostname", "b")}, lim).Err(), "a")
}

func TestTimestamp(t *testing.T) {
	cases := []struct {
		name string
		ts   *timestamppb.Timestamp
		f    string
	}{
		{"now", ts(now), ""},
		// Any time a clock can read, however far from the checker's.
		{"a day ago", ts(now.Add(-24 * time.Hour)), ""},
		{"a year ahead", ts(now.Add(365 * 24 * time.Hour)), ""},
		{"the epoch", ts(time.Unix(0, 0)), ""},
		{"year 9999", ts(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)), ""},
		// What no clock reads.
		{"1969", ts(time.Unix(-1, 0)), "x"},
		{"year 1", ts(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)), "x"},
		{"nil", nil, "x"},
		{"out of range", &timestamppb.Timestamp{Seconds: 1 << 62}, "x"},
		{"negative nanos", &timestamppb.Timestamp{Seconds: now.Unix(), Nanos: -5}, "x"},
	}
	for _, c := range cases {
		check(t, "Timestamp/"+c.name, asErr(Timestamp("x", c.ts)), c.f)
	}
}

func validStatus() *nodev1.NodeStatus {
	return &nodev1.NodeStatus{
		Capacity:    map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110"},
		Allocatable: map[string]string{"cpu": "3800m", "memory": "15Gi", "pods": "110"},
		Conditions: []*nodev1.NodeCondition{
			{Type: "MemoryPressure", Status: "False", LastHeartbeatTime: ts(now), LastTransitionTime: ts(now)},
			{Type: "Ready", Status: "True", Reason: "KubeletReady", Message: "reporter is posting ready status", LastHeartbeatTime: ts(now), LastTransitionTime: ts(now)},
		},
		Addresses:       []*nodev1.NodeAddress{{Type: "InternalIP", Address: "10.0.0.5"}, {Type: "Hostname", Address: "node-1"}},
		DaemonEndpoints: &nodev1.NodeDaemonEndpoints{ReporterEndpoint: &nodev1.DaemonEndpoint{Port: 9192}},
		NodeInfo:        &nodev1.NodeSystemInfo{MachineId: "abc", KernelVersion: "6.1.0", OperatingSystem: "linux", Architecture: "amd64"},
	}
}

func TestStatusReport(t *testing.T) {
	lim := DefaultLimits()
	check(t, "Status/valid", StatusReport(&collectorv1.StatusReport{Status: validStatus()}, now, lim).Err(), "")
	cases := []struct {
		name  string
		mut   func(*nodev1.NodeStatus)
		field string
	}{
		{"capacity", func(s *nodev1.NodeStatus) { s.Capacity["cpu"] = "1e12" }, "status.capacity[cpu]"},
		{"allocatable above capacity", func(s *nodev1.NodeStatus) { s.Allocatable["memory"] = "17Gi" }, "status.allocatable[memory]"},
		{"condition", func(s *nodev1.NodeStatus) { s.Conditions[1].Status = "Yes" }, "status.conditions[1].status"},
		{"address", func(s *nodev1.NodeStatus) { s.Addresses[0].Address = "999.1.1.1" }, "status.addresses[0].address"},
		{"port", func(s *nodev1.NodeStatus) { s.DaemonEndpoints.ReporterEndpoint.Port = 70000 }, "status.daemonEndpoints.reporterEndpoint.Port"},
		{"node info", func(s *nodev1.NodeStatus) { s.NodeInfo.KernelVersion = strings.Repeat("x", 300) }, "status.nodeInfo.kernelVersion"},
		{"resource name", func(s *nodev1.NodeStatus) { s.Capacity["bad name!"] = "1" }, "status.capacity[bad name!]"},
		{"condition type", func(s *nodev1.NodeStatus) { s.Conditions[0].Type = "" }, "status.conditions[0].type"},
		{"duplicate condition", func(s *nodev1.NodeStatus) { s.Conditions[1].Type = "MemoryPressure" }, "status.conditions[1].type"},
		// A node's clock is never a reason to refuse (ADR 0036); only a
		// time no clock reads is.
		{"heartbeat an hour ahead", func(s *nodev1.NodeStatus) { s.Conditions[1].LastHeartbeatTime = ts(now.Add(time.Hour)) }, ""},
		{"heartbeat a year behind", func(s *nodev1.NodeStatus) { s.Conditions[1].LastHeartbeatTime = ts(now.Add(-365 * 24 * time.Hour)) }, ""},
		{"heartbeat year 1", func(s *nodev1.NodeStatus) {
			s.Conditions[1].LastHeartbeatTime = ts(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC))
		}, "status.conditions[1].lastHeartbeatTime"},
		{"heartbeat 1969", func(s *nodev1.NodeStatus) { s.Conditions[0].LastHeartbeatTime = ts(time.Unix(-1, 0)) }, "status.conditions[0].lastHeartbeatTime"},
		{"transition long ago", func(s *nodev1.NodeStatus) {
			s.Conditions[1].LastTransitionTime = ts(now.Add(-3 * 365 * 24 * time.Hour))
		}, ""},
		{"transition a year ahead", func(s *nodev1.NodeStatus) { s.Conditions[1].LastTransitionTime = ts(now.Add(365 * 24 * time.Hour)) }, ""},
		{"transition before 1970", func(s *nodev1.NodeStatus) { s.Conditions[1].LastTransitionTime = ts(time.Unix(-86400, 0)) }, "status.conditions[1].lastTransitionTime"},
		{"null condition", func(s *nodev1.NodeStatus) { s.Conditions[1] = nil }, "status.conditions[1]"},
		{"duplicate address", func(s *nodev1.NodeStatus) { s.Addresses[1] = s.Addresses[0] }, "status.addresses[1]"},
		{"address type", func(s *nodev1.NodeStatus) { s.Addresses[1].Type = "Elsewhere" }, "status.addresses[1].type"},
		{"too many conditions", func(s *nodev1.NodeStatus) {
			for len(s.Conditions) <= lim.MaxConditions {
				s.Conditions = append(s.Conditions, s.Conditions[0])
			}
		}, "status.conditions"},
	}
	for _, c := range cases {
		s := validStatus()
		c.mut(s)
		check(t, "Status/"+c.name, StatusReport(&collectorv1.StatusReport{Status: s}, now, lim).Err(), c.field)
	}
	check(t, "Status/missing", StatusReport(&collectorv1.StatusReport{}, now, lim).Err(), "status")

	// Maps are walked in random order; their errors come out by key.
	s := validStatus()
	s.Capacity["zz.example.com/b"], s.Capacity["aa.example.com/a"], s.Capacity["mm.example.com/c"] = "-1", "x", "-2"
	l := StatusReport(&collectorv1.StatusReport{Status: s}, now, lim)
	var got []string
	for _, e := range l {
		got = append(got, e.Field)
	}
	want := []string{"status.capacity[aa.example.com/a]", "status.capacity[mm.example.com/c]", "status.capacity[zz.example.com/b]"}
	if !slices.Equal(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
}

func TestRegister(t *testing.T) {
	lim := DefaultLimits()
	valid := func() *collectorv1.Register {
		return &collectorv1.Register{NodeName: "node-1", Labels: map[string]string{"kubernetes.io/hostname": "node-1"},
			RegisterWithTaints: []*nodev1.Taint{{Key: "dedicated", Value: "infra", Effect: "NoSchedule"}}, ReporterVersion: "v0.1.0", ReporterId: "abc"}
	}
	check(t, "Register/valid", Register(valid(), now, lim).Err(), "")
	cases := []struct {
		name  string
		mut   func(*collectorv1.Register)
		field string
	}{
		{"empty name", func(r *collectorv1.Register) { r.NodeName = "" }, "register.nodeName"},
		{"upper-case name", func(r *collectorv1.Register) { r.NodeName = "Node1" }, "register.nodeName"},
		{"label", func(r *collectorv1.Register) { r.Labels["bad key!"] = "v" }, "register.labels[bad key!]"},
		{"taint", func(r *collectorv1.Register) { r.RegisterWithTaints[0].Effect = "Never" }, "register.registerWithTaints[0].effect"},
		{"version", func(r *collectorv1.Register) { r.ReporterVersion = strings.Repeat("v", 257) }, "register.reporterVersion"},
		{"reporter id", func(r *collectorv1.Register) { r.ReporterId = strings.Repeat("i", 257) }, "register.reporterId"},
		{"taint added before 1970", func(r *collectorv1.Register) { r.RegisterWithTaints[0].TimeAdded = ts(time.Unix(-1, 0)) }, "register.registerWithTaints[0].timeAdded"},
		{"taint added a year ahead", func(r *collectorv1.Register) { r.RegisterWithTaints[0].TimeAdded = ts(now.Add(365 * 24 * time.Hour)) }, ""},
		{"taint added long ago", func(r *collectorv1.Register) { r.RegisterWithTaints[0].TimeAdded = ts(now.Add(-1000 * time.Hour)) }, ""},
	}
	for _, c := range cases {
		r := valid()
		c.mut(r)
		check(t, "Register/"+c.name, Register(r, now, lim).Err(), c.field)
	}
	check(t, "Register/nil", Register(nil, now, lim).Err(), "register")
}

func TestLeaseRenewal(t *testing.T) {
	lim := DefaultLimits()
	const year = 365 * 24 * time.Hour
	cases := []struct {
		name  string
		r     *collectorv1.LeaseRenewal
		field string
	}{
		{"now", &collectorv1.LeaseRenewal{RenewTime: ts(now), LeaseDurationSeconds: 40}, ""},
		// The node's clock, however far off, is measured, not refused.
		{"a year behind", &collectorv1.LeaseRenewal{RenewTime: ts(now.Add(-year)), LeaseDurationSeconds: 40}, ""},
		{"an hour ahead", &collectorv1.LeaseRenewal{RenewTime: ts(now.Add(time.Hour)), LeaseDurationSeconds: 40}, ""},
		{"a year ahead", &collectorv1.LeaseRenewal{RenewTime: ts(now.Add(year)), LeaseDurationSeconds: 40}, ""},
		{"the epoch (a clock never set)", &collectorv1.LeaseRenewal{RenewTime: ts(time.Unix(0, 0)), LeaseDurationSeconds: 40}, ""},
		{"year 1", &collectorv1.LeaseRenewal{RenewTime: ts(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)), LeaseDurationSeconds: 40}, "lease.renewTime"},
		{"1969", &collectorv1.LeaseRenewal{RenewTime: ts(time.Unix(-1, 0)), LeaseDurationSeconds: 40}, "lease.renewTime"},
		{"beyond 9999", &collectorv1.LeaseRenewal{RenewTime: &timestamppb.Timestamp{Seconds: 253402300800}, LeaseDurationSeconds: 40}, "lease.renewTime"},
		{"nanos out of range", &collectorv1.LeaseRenewal{RenewTime: &timestamppb.Timestamp{Seconds: now.Unix(), Nanos: 1e9}, LeaseDurationSeconds: 40}, "lease.renewTime"},
		{"missing time", &collectorv1.LeaseRenewal{LeaseDurationSeconds: 40}, "lease.renewTime"},
		{"zero duration", &collectorv1.LeaseRenewal{RenewTime: ts(now)}, "lease.leaseDurationSeconds"},
		{"negative duration", &collectorv1.LeaseRenewal{RenewTime: ts(now), LeaseDurationSeconds: -1}, "lease.leaseDurationSeconds"},
		{"huge duration", &collectorv1.LeaseRenewal{RenewTime: ts(now), LeaseDurationSeconds: 86400}, "lease.leaseDurationSeconds"},
	}
	for _, c := range cases {
		check(t, "Lease/"+c.name, LeaseRenewal(c.r, lim).Err(), c.field)
	}
	check(t, "Leaving/long", Leaving(&collectorv1.Leaving{Reason: strings.Repeat("r", 300)}).Err(), "leaving.reason")
	check(t, "Leaving/ok", Leaving(&collectorv1.Leaving{Reason: "shutdown"}).Err(), "")
}

func TestStatusPassesThroughGRPCStatus(t *testing.T) {
	in := status.Error(codes.PermissionDenied, "no")
	if got := Status(in); status.Code(got) != codes.PermissionDenied {
		t.Fatalf("Status(PermissionDenied) = %v", got)
	}
	if Status(nil) != nil {
		t.Fatal("Status(nil) != nil")
	}
	if List(nil).Err() != nil {
		t.Fatal("empty List.Err() != nil")
	}
}

func TestMetricField(t *testing.T) {
	for in, want := range map[string]string{
		"status.capacity[cpu]":                    "status.capacity[*]",
		"status.conditions[3].type":               "status.conditions[*].type",
		"register.labels[a[b]]":                   "register.labels[*]",
		"register.nodeName":                       "register.nodeName",
		"register.registerWithTaints[0].effect":   "register.registerWithTaints[*].effect",
		"status.daemonEndpoints.reporterEndpoint": "status.daemonEndpoints.reporterEndpoint",
	} {
		if got := MetricField(in); got != want {
			t.Errorf("MetricField(%q) = %q, want %q", in, got, want)
		}
	}
}
