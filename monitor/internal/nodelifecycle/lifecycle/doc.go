// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package lifecycle holds the pure rules of the node lifecycle controller
// (spec §6): the per-node health record and the grace-period judgement, the
// NoSchedule condition taints, the NoExecute taint decisions, and the
// rate-limited taint queue (zone states and their rates are package zones).
// Nothing here does I/O or reads a clock: every function takes `now`, so
// every rule is tested with table cases and the controller only wires
// inputs to outputs.
//
// Timing model. All timestamps the rules compare are the monitor's own clock
// (the Kubernetes probeTimestamp). Reporter clocks are only ever compared
// with earlier reporter timestamps of the same node ("did renewTime
// advance?"), so clock skew between machines never makes a node Unknown.
package lifecycle
