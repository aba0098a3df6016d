// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package setters computes a node's status the way the kubelet's status
// setters do (spec §5): from the previous status (as the control plane shows
// it), a probe of the host and the clock, run in a fixed order. Every
// function is pure: time comes in as now, host data as a probe.Snapshot, so
// the rules are tested as tables without a host or a clock.
//
// Invariants: the input status is never modified; a setter error is
// collected and the remaining setters still run; conditions keep their order
// except that Ready is always last; a condition whose status did not change
// keeps its transition time, reason and message; lastHeartbeatTime is now on
// every condition the reporter owns.
//
// The package is exported (not internal) only so that the tests module's
// fleet simulator builds its virtual nodes' statuses with these very rules;
// nothing outside the reporter is meant to depend on it.
package setters

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/resource"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/reporter/probe"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/validation"
)

// Resource names.
const (
	ResourceCPU              = "cpu"
	ResourceMemory           = "memory"
	ResourcePods             = "pods"
	ResourceEphemeralStorage = "ephemeral-storage"
	ResourceHugePagesPrefix  = "hugepages-"
)

// Condition reasons and messages the reporter writes (spec §5.3, §5.4).
const (
	ReasonSufficientMemory   = "KubeletHasSufficientMemory"
	ReasonInsufficientMemory = "KubeletHasInsufficientMemory"
	ReasonNoDiskPressure     = "KubeletHasNoDiskPressure"
	ReasonDiskPressure       = "KubeletHasDiskPressure"
	ReasonSufficientPID      = "KubeletHasSufficientPID"
	ReasonInsufficientPID    = "KubeletHasInsufficientPID"
	ReasonReady              = "KubeletReady"
	ReasonNotReady           = "KubeletNotReady"
	MessageReady             = "kubelet is posting ready status"
)

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Event is something worth telling an operator, as the kubelet would record a
// Kubernetes event. The reporter logs them.
type Event struct {
	Type    string
	Reason  string
	Message string
}

// Config is what the setters need from the reporter's configuration.
type Config struct {
	// NodeName is also the Hostname address.
	NodeName string
	// NodeIP is the configured node IP (--node-ip), "" to detect.
	NodeIP string
	// MaxPods is the pods capacity.
	MaxPods int64
	// KubeReserved and SystemReserved are subtracted from capacity.
	KubeReserved   map[string]resource.Quantity
	SystemReserved map[string]resource.Quantity
	// EvictionHard thresholds decide pressure and are subtracted from
	// allocatable (memory.available from memory, nodefs.available from
	// ephemeral-storage).
	EvictionHard Thresholds
	// ReporterVersion goes into nodeInfo.
	ReporterVersion string
	// ExternalAddresses (ExternalIP, ExternalDNS) follow InternalIP and
	// Hostname in the addresses (ParseExternalAddresses).
	ExternalAddresses []*nodev1.NodeAddress
	// ReporterPort is the admin port, published as the daemon endpoint.
	ReporterPort int32
	// LocalStorageIsolation makes ephemeral-storage a required capacity
	// (the kubelet default).
	LocalStorageIsolation bool
}

// Inputs is one observation of the host.
type Inputs struct {
	// Host is the probe reading; nil means nothing could be read.
	Host *probe.Snapshot
	// NodeIP is the chosen InternalIP, or nil with AddressErr set.
	NodeIP     net.IP
	AddressErr error
	// Pressure says which pressure conditions hold, as decided by
	// Pressure(); the simulator sets it directly.
	Pressure PressureFlags
	// RuntimeVersion is the host's container runtime as
	// "<runtime>://<version>" (package runtimeinfo), "" when there is none.
	RuntimeVersion string
	// RuntimeErrs, NetworkErrs, StorageErrs, ShutdownErrs feed the Ready
	// condition, in that order (spec §5.4).
	RuntimeErrs, NetworkErrs, StorageErrs, ShutdownErrs []error
}

// PressureFlags says which pressure conditions hold.
type PressureFlags struct {
	Memory, Disk, PID bool
}

// Result is the outcome of one run of the setters.
type Result struct {
	Status *nodev1.NodeStatus
	Events []Event
	// Errs are setter errors, to be logged; the status is still usable.
	Errs []error
}

// Apply runs every setter in order (spec §5: NodeAddress, MachineInfo,
// VersionInfo, DaemonEndpoints, MemoryPressure, DiskPressure, PIDPressure,
// Ready) on a copy of old and returns the new status. old may be nil (a
// fresh node).
func Apply(now time.Time, cfg *Config, in Inputs, old *nodev1.NodeStatus) Result {
	st := proto.CloneOf(old)
	if st == nil {
		st = &nodev1.NodeStatus{}
	}
	r := Result{Status: st}
	setters := []func(now time.Time, cfg *Config, in Inputs, st *nodev1.NodeStatus, r *Result) error{
		setAddresses, setMachineInfo, setVersionInfo, setDaemonEndpoints,
		memoryPressure, diskPressure, pidPressure, setReady,
	}
	for _, s := range setters {
		if err := s(now, cfg, in, st, &r); err != nil {
			r.Errs = append(r.Errs, err)
		}
	}
	keepReadyLast(st)
	return r
}

// setAddresses writes [InternalIP, Hostname] (spec §5.1, no cloud provider),
// then the configured external addresses.
// When no IP can be found the previous addresses stay, as upstream leaves the
// node untouched on a setter error.
func setAddresses(_ time.Time, cfg *Config, in Inputs, st *nodev1.NodeStatus, _ *Result) error {
	if in.NodeIP == nil {
		if in.AddressErr != nil {
			return in.AddressErr
		}
		return fmt.Errorf("can't get ip address of node %s", cfg.NodeName)
	}
	st.Addresses = []*nodev1.NodeAddress{
		{Type: nodemodel.AddressInternalIP, Address: in.NodeIP.String()},
		{Type: nodemodel.AddressHostname, Address: cfg.NodeName},
	}
	for _, a := range cfg.ExternalAddresses {
		st.Addresses = append(st.Addresses, &nodev1.NodeAddress{Type: a.GetType(), Address: a.GetAddress()})
	}
	return nil
}

// setMachineInfo sets capacity, allocatable and the machine ids, and reports
// a reboot when the boot id changed (spec §5.2).
func setMachineInfo(_ time.Time, cfg *Config, in Inputs, st *nodev1.NodeStatus, r *Result) error {
	h := in.Host
	if h == nil {
		h = &probe.Snapshot{MachineErr: errors.New("no host reading"), FSErr: errors.New("no host reading")}
	}
	// The formats are the kubelet's: bytes in binary units ("16318080Ki"),
	// counts in decimal ones, CPU in cores or millicores (format).
	capacity := map[string]resource.Quantity{ResourcePods: *resource.NewQuantity(cfg.MaxPods, resource.DecimalSI)}
	if h.MachineErr != nil {
		// As upstream: unknown machine → cpu and memory 0, so the node stays
		// schedulable by nothing but still reports.
		capacity[ResourceCPU] = *resource.NewQuantity(0, resource.DecimalSI)
		capacity[ResourceMemory] = *resource.NewQuantity(0, resource.BinarySI)
	} else {
		capacity[ResourceCPU] = *resource.NewQuantity(int64(h.NumCPU), resource.DecimalSI)
		capacity[ResourceMemory] = *resource.NewQuantity(h.MemTotalBytes, resource.BinarySI)
		for size, bytes := range h.HugePages {
			capacity[ResourceHugePagesPrefix+resource.NewQuantity(size, resource.BinarySI).String()] = *resource.NewQuantity(bytes, resource.BinarySI)
		}
	}
	if h.FSErr == nil {
		capacity[ResourceEphemeralStorage] = *resource.NewQuantity(h.NodeFS.CapacityBytes, resource.BinarySI)
	}

	reserved := map[string]resource.Quantity{}
	add := func(k string, v resource.Quantity) {
		r := reserved[k]
		r.Add(v)
		reserved[k] = r
	}
	for _, m := range []map[string]resource.Quantity{cfg.KubeReserved, cfg.SystemReserved} {
		for k, v := range m {
			add(k, v)
		}
	}
	if th, ok := cfg.EvictionHard[SignalMemoryAvailable]; ok {
		add(ResourceMemory, th.amount(h.MemTotalBytes))
	}
	if th, ok := cfg.EvictionHard[SignalNodeFSAvailable]; ok && h.FSErr == nil {
		add(ResourceEphemeralStorage, th.amount(h.NodeFS.CapacityBytes))
	}
	allocatable := map[string]resource.Quantity{}
	for k, c := range capacity {
		a := c.DeepCopy()
		a.Sub(reserved[k])
		if k == ResourceMemory {
			// Pre-allocated huge pages are not available as ordinary memory.
			for hk, hv := range capacity {
				if strings.HasPrefix(hk, ResourceHugePagesPrefix) {
					a.Sub(hv)
				}
			}
		}
		if a.Sign() < 0 {
			a = *resource.NewQuantity(0, c.Format)
		}
		allocatable[k] = a
	}
	st.Capacity = format(capacity)
	st.Allocatable = format(allocatable)

	if st.NodeInfo == nil {
		st.NodeInfo = &nodev1.NodeSystemInfo{}
	}
	// An identity that could not be read this time (the probe leaves it
	// empty) keeps the value the node had: upstream sets them only from a
	// machine info it could read, so a read error leaves the node as it was
	// (spec §5.2); clearing them would also be a status change, an etcd
	// write, and another one when the read works again.
	oldBoot := st.NodeInfo.BootId
	keepUnlessUnread(&st.NodeInfo.MachineId, h.MachineID)
	keepUnlessUnread(&st.NodeInfo.SystemUuid, h.SystemUUID)
	keepUnlessUnread(&st.NodeInfo.BootId, h.BootID)
	if oldBoot != "" && h.BootID != "" && oldBoot != h.BootID {
		r.Events = append(r.Events, Event{Type: EventWarning, Reason: "NodeRebooted",
			Message: fmt.Sprintf("Node %s has been rebooted, boot id: %s", cfg.NodeName, h.BootID)})
	}
	return h.MachineErr
}

func format(m map[string]resource.Quantity) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k == ResourceCPU {
			// Whole millicores, rounded up (a reservation of "0.0001"
			// cores still reserves one).
			out[k] = resource.NewMilliQuantity(v.MilliValue(), resource.DecimalSI).String()
			continue
		}
		out[k] = v.String()
	}
	return out
}

func setVersionInfo(_ time.Time, cfg *Config, in Inputs, st *nodev1.NodeStatus, _ *Result) error {
	if st.NodeInfo == nil {
		st.NodeInfo = &nodev1.NodeSystemInfo{}
	}
	ni := st.NodeInfo
	ni.ReporterVersion = cfg.ReporterVersion
	ni.OperatingSystem = runtime.GOOS
	ni.Architecture = runtime.GOARCH
	// The runtime the host runs, as the kubelet reports it; empty on a
	// host without one rather than claiming one (see node.proto).
	ni.ContainerRuntimeVersion = in.RuntimeVersion
	if in.Host == nil {
		return nil
	}
	// Upstream's VersionInfo setter returns the error before it sets
	// anything, so the node keeps the kernel and OS image it had (spec
	// §5.2); here each field the probe could not read keeps its value.
	keepUnlessUnread(&ni.KernelVersion, in.Host.KernelVersion)
	keepUnlessUnread(&ni.OsImage, in.Host.OSImage)
	return errors.Join(in.Host.InfoErrs...)
}

// keepUnlessUnread sets *dst to read unless the probe could not read it:
// probe.Snapshot leaves a field it could not read empty, and an empty
// file or value counts as unread.
func keepUnlessUnread(dst *string, read string) {
	if read != "" {
		*dst = read
	}
}

func setDaemonEndpoints(_ time.Time, cfg *Config, _ Inputs, st *nodev1.NodeStatus, _ *Result) error {
	st.DaemonEndpoints = &nodev1.NodeDaemonEndpoints{ReporterEndpoint: &nodev1.DaemonEndpoint{Port: cfg.ReporterPort}}
	return nil
}

// pressureText is the reason/message/event of one pressure condition.
type pressureText struct {
	condType                           string
	trueReason, trueMessage, trueEvent string
	falseReason, falseMsg, falseEvent  string
}

var (
	memoryText = pressureText{nodemodel.MemoryPressure,
		ReasonInsufficientMemory, "kubelet has insufficient memory available", "NodeHasInsufficientMemory",
		ReasonSufficientMemory, "kubelet has sufficient memory available", "NodeHasSufficientMemory"}
	diskText = pressureText{nodemodel.DiskPressure,
		ReasonDiskPressure, "kubelet has disk pressure", "NodeHasDiskPressure",
		ReasonNoDiskPressure, "kubelet has no disk pressure", "NodeHasNoDiskPressure"}
	pidText = pressureText{nodemodel.PIDPressure,
		ReasonInsufficientPID, "kubelet has insufficient PID available", "NodeHasInsufficientPID",
		ReasonSufficientPID, "kubelet has sufficient PID available", "NodeHasSufficientPID"}
)

func memoryPressure(now time.Time, _ *Config, in Inputs, st *nodev1.NodeStatus, r *Result) error {
	setPressure(now, memoryText, in.Pressure.Memory, st, r)
	return nil
}

func diskPressure(now time.Time, _ *Config, in Inputs, st *nodev1.NodeStatus, r *Result) error {
	setPressure(now, diskText, in.Pressure.Disk, st, r)
	return nil
}

func pidPressure(now time.Time, _ *Config, in Inputs, st *nodev1.NodeStatus, r *Result) error {
	setPressure(now, pidText, in.Pressure.PID, st, r)
	return nil
}

// setPressure is the shared pressure algorithm of spec §5.3.
func setPressure(now time.Time, t pressureText, pressure bool, st *nodev1.NodeStatus, r *Result) {
	c := nodemodel.FindCondition(st.Conditions, t.condType)
	if c == nil {
		c = &nodev1.NodeCondition{Type: t.condType, Status: nodemodel.Unknown}
		st.Conditions = append(st.Conditions, c)
	}
	c.LastHeartbeatTime = nodemodel.Timestamp(now)
	switch {
	case pressure && c.Status != nodemodel.True:
		c.Status, c.Reason, c.Message = nodemodel.True, t.trueReason, t.trueMessage
		c.LastTransitionTime = nodemodel.Timestamp(now)
		r.Events = append(r.Events, Event{Type: EventNormal, Reason: t.trueEvent, Message: eventMessage(st, t.trueEvent)})
	case !pressure && c.Status != nodemodel.False:
		c.Status, c.Reason, c.Message = nodemodel.False, t.falseReason, t.falseMsg
		c.LastTransitionTime = nodemodel.Timestamp(now)
		r.Events = append(r.Events, Event{Type: EventNormal, Reason: t.falseEvent, Message: eventMessage(st, t.falseEvent)})
	}
	// Otherwise status, reason, message and transition time stay as stored,
	// even a legacy reason: rewriting it would be a change for nothing.
}

// eventMessage follows the kubelet's "Node <name> status is now: <reason>".
func eventMessage(st *nodev1.NodeStatus, reason string) string {
	name := ""
	for _, a := range st.Addresses {
		if a.Type == nodemodel.AddressHostname {
			name = a.Address
		}
	}
	return fmt.Sprintf("Node %s status is now: %s", name, reason)
}

// setReady is spec §5.4.
func setReady(now time.Time, cfg *Config, in Inputs, st *nodev1.NodeStatus, r *Result) error {
	var errs []error
	errs = append(errs, in.RuntimeErrs...)
	errs = append(errs, in.NetworkErrs...)
	errs = append(errs, in.StorageErrs...)
	errs = append(errs, in.ShutdownErrs...)
	required := []string{ResourceCPU, ResourceMemory, ResourcePods}
	if cfg.LocalStorageIsolation {
		required = append(required, ResourceEphemeralStorage)
	}
	var missing []string
	for _, res := range required {
		if _, ok := st.Capacity[res]; !ok {
			missing = append(missing, res)
		}
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("missing node capacity for resources: %s", strings.Join(missing, ", ")))
	}
	want := &nodev1.NodeCondition{
		Type:              nodemodel.Ready,
		Status:            nodemodel.True,
		Reason:            ReasonReady,
		Message:           MessageReady,
		LastHeartbeatTime: nodemodel.Timestamp(now),
	}
	if len(errs) > 0 {
		want.Status, want.Reason, want.Message = nodemodel.False, ReasonNotReady, Aggregate(errs)
	}
	c := nodemodel.FindCondition(st.Conditions, nodemodel.Ready)
	switch {
	case c == nil:
		// First Ready: transition now, no event (spec §5.4).
		want.LastTransitionTime = nodemodel.Timestamp(now)
		st.Conditions = append(st.Conditions, want)
	case c.Status == want.Status:
		want.LastTransitionTime = c.LastTransitionTime
		proto.Reset(c)
		proto.Merge(c, want)
	default:
		want.LastTransitionTime = nodemodel.Timestamp(now)
		proto.Reset(c)
		proto.Merge(c, want)
		reason := "NodeNotReady"
		if want.Status == nodemodel.True {
			reason = "NodeReady"
		}
		r.Events = append(r.Events, Event{Type: EventNormal, Reason: reason, Message: eventMessage(st, reason)})
	}
	return nil
}

// Aggregate formats errors as Kubernetes' error aggregate does: one error is
// its own text, several are "[e1, e2]".
func Aggregate(errs []error) string {
	switch len(errs) {
	case 0:
		return ""
	case 1:
		return errs[0].Error()
	}
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Error()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// keepReadyLast moves Ready to the end of the list, keeping the others in
// order, so a status that gained a condition after Ready still reads like a
// fresh node's (spec §2.1: "keep Ready last").
func keepReadyLast(st *nodev1.NodeStatus) {
	i := slices.IndexFunc(st.Conditions, func(c *nodev1.NodeCondition) bool { return c.Type == nodemodel.Ready })
	if i < 0 || i == len(st.Conditions)-1 {
		return
	}
	ready := st.Conditions[i]
	st.Conditions = append(slices.Delete(st.Conditions, i, i+1), ready)
}

// Pressure decides the three pressure flags from the host reading and the
// hard thresholds, through hold (which may be nil for no hold-down). Signals
// whose numbers are unknown never cause pressure: a broken probe must not
// taint a node.
func Pressure(now time.Time, th Thresholds, h *probe.Snapshot, hold *PressureHold) PressureFlags {
	if h == nil {
		return PressureFlags{}
	}
	memKnown := h.MachineErr == nil
	fsKnown := h.FSErr == nil
	pidKnown := h.PIDErr == nil && h.PIDMax > 0
	fs := h.NodeFS
	mem := th.crossed(SignalMemoryAvailable, h.MemAvailableBytes, h.MemTotalBytes, memKnown)
	// Without a separate image filesystem the kubelet evaluates the imagefs
	// signals against the node filesystem; so do we.
	disk := th.crossed(SignalNodeFSAvailable, fs.AvailableBytes, fs.CapacityBytes, fsKnown) ||
		th.crossed(SignalNodeFSInodesFree, fs.InodesFree, fs.Inodes, fsKnown && fs.Inodes > 0) ||
		th.crossed(SignalImageFSAvailable, fs.AvailableBytes, fs.CapacityBytes, fsKnown) ||
		th.crossed(SignalImageFSInodesFree, fs.InodesFree, fs.Inodes, fsKnown && fs.Inodes > 0)
	pid := th.crossed(SignalPIDAvailable, h.PIDMax-h.Processes, h.PIDMax, pidKnown)
	if hold != nil {
		mem = hold.Observe(now, nodemodel.MemoryPressure, mem)
		disk = hold.Observe(now, nodemodel.DiskPressure, disk)
		pid = hold.Observe(now, nodemodel.PIDPressure, pid)
	}
	return PressureFlags{Memory: mem, Disk: disk, PID: pid}
}

// ParseReserved reads "cpu=100m,memory=1Gi,ephemeral-storage=1Gi".
func ParseReserved(m map[string]string) (map[string]resource.Quantity, error) {
	out := map[string]resource.Quantity{}
	for k, v := range m {
		switch k {
		case ResourceCPU, ResourceMemory, ResourceEphemeralStorage, "pid":
		default:
			return nil, fmt.Errorf("reserved resource %q: want cpu, memory, ephemeral-storage or pid", k)
		}
		q, err := validation.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("reserved %s: %w", k, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("reserved %s: negative quantity %s", k, v)
		}
		out[k] = q
	}
	return out, nil
}

// ConditionText returns the reason and message the setters write for a
// kubelet condition in the given status (True/False), so a caller that keeps
// only compact state (the fleet simulator) can rebuild the previous
// conditions exactly; "" for combinations the setters do not produce on
// their own (Ready False carries the error text).
func ConditionText(condType, status string) (reason, message string) {
	for _, t := range []pressureText{memoryText, diskText, pidText} {
		if t.condType != condType {
			continue
		}
		if status == nodemodel.True {
			return t.trueReason, t.trueMessage
		}
		return t.falseReason, t.falseMsg
	}
	if condType == nodemodel.Ready && status == nodemodel.True {
		return ReasonReady, MessageReady
	}
	return "", ""
}
