// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package nodemodel holds the shared meaning of the node model: the
// well-known names of the spec (condition types, reasons, taint keys, labels),
// change detection between two statuses, and the merge that serves a node
// from its separately stored parts. Reporter, collector and monitor all use
// it, so they agree on what "changed" and "the node" mean.
package nodemodel

// Condition types.
const (
	Ready              = "Ready"
	MemoryPressure     = "MemoryPressure"
	DiskPressure       = "DiskPressure"
	PIDPressure        = "PIDPressure"
	NetworkUnavailable = "NetworkUnavailable"
)

// ReporterConditions are the condition types the reporter owns, in the order
// they appear on a fresh node (Ready last). The monitor marks exactly these
// Unknown.
var ReporterConditions = []string{MemoryPressure, DiskPressure, PIDPressure, Ready}

// UnknownOrder is the order in which the monitor marks the reporter's
// conditions Unknown (spec §6.2 step 4), upstream's nodeConditionTypes in
// tryUpdateNodeHealth: a condition the node has is changed in place, and the
// missing ones are appended in this order, so a node that never reported is
// served Ready, MemoryPressure, DiskPressure, PIDPressure, as in Kubernetes.
var UnknownOrder = []string{Ready, MemoryPressure, DiskPressure, PIDPressure}

// Condition statuses.
const (
	True    = "True"
	False   = "False"
	Unknown = "Unknown"
)

// Reasons and messages the monitor writes (spec §6.2).
const (
	ReasonNodeStatusUnknown      = "NodeStatusUnknown"
	MessageNodeStatusUnknown     = "Kubelet stopped posting node status."
	ReasonNodeStatusNeverUpdated = "NodeStatusNeverUpdated"
	MessageNodeStatusNeverUpd    = "Kubelet never posted node status."
)

// Taint effects.
const (
	NoSchedule       = "NoSchedule"
	PreferNoSchedule = "PreferNoSchedule"
	NoExecute        = "NoExecute"
)

// Well-known taint keys (spec §2.3).
const (
	TaintNotReady           = "node.kubernetes.io/not-ready"
	TaintUnreachable        = "node.kubernetes.io/unreachable"
	TaintUnschedulable      = "node.kubernetes.io/unschedulable"
	TaintMemoryPressure     = "node.kubernetes.io/memory-pressure"
	TaintDiskPressure       = "node.kubernetes.io/disk-pressure"
	TaintPIDPressure        = "node.kubernetes.io/pid-pressure"
	TaintNetworkUnavailable = "node.kubernetes.io/network-unavailable"
	TaintOutOfService       = "node.kubernetes.io/out-of-service"
)

// Well-known labels.
const (
	LabelHostname          = "kubernetes.io/hostname"
	LabelOS                = "kubernetes.io/os"
	LabelArch              = "kubernetes.io/arch"
	LabelZone              = "topology.kubernetes.io/zone"
	LabelRegion            = "topology.kubernetes.io/region"
	LabelZoneLegacy        = "failure-domain.beta.kubernetes.io/zone"
	LabelRegionLegacy      = "failure-domain.beta.kubernetes.io/region"
	LabelInstanceType      = "node.kubernetes.io/instance-type"
	LabelExcludeDisruption = "node.kubernetes.io/exclude-disruption"
)

// Address types.
const (
	AddressHostname    = "Hostname"
	AddressInternalIP  = "InternalIP"
	AddressExternalIP  = "ExternalIP"
	AddressInternalDNS = "InternalDNS"
	AddressExternalDNS = "ExternalDNS"
)
