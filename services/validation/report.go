// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package validation

import (
	"time"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// Bounds of what a reporter asserts about its lease.
const (
	// MaxLeaseDurationSeconds: an hour. Longer leases would hide a dead node
	// for longer than any sane grace period.
	MaxLeaseDurationSeconds = 3600
	// MaxShortTextLength bounds free-text identifiers (reporter id and
	// version, leaving reason).
	MaxShortTextLength = 256
)

// TimeFloor is the earliest time a client may send: the Unix epoch. Earlier
// cannot be right whatever the clock (a clock that was never set reads
// 1970 or later), and times are kept in Unix nanoseconds downstream.
var TimeFloor = time.Unix(0, 0).UTC()

// Register checks a registration: node name, labels, taints and the short
// identifiers. Field paths start with "register.".
func Register(r *collectorv1.Register, now time.Time, lim Limits) List {
	if r == nil {
		return List{fieldErr("register", "must be set")}
	}
	var l List
	l.add(NodeName("register.nodeName", r.GetNodeName()))
	l = append(l, Labels("register.labels", r.GetLabels(), lim.MaxLabels)...)
	l = append(l, Taints("register.registerWithTaints", r.GetRegisterWithTaints(), now, lim)...)
	if len(r.GetReporterVersion()) > MaxShortTextLength {
		l.add(fieldErr("register.reporterVersion", "must be no more than %d characters", MaxShortTextLength))
	}
	if len(r.GetReporterId()) > MaxShortTextLength {
		l.add(fieldErr("register.reporterId", "must be no more than %d characters", MaxShortTextLength))
	}
	return l
}

// LeaseRenewal checks a renewal: renewTime a time a clock can read
// (Timestamp), the duration in 1..3600 seconds. How far renewTime is from
// the collector's clock is measured, never refused: the collector dates
// the renewal by its own receipt (ADR 0036).
func LeaseRenewal(r *collectorv1.LeaseRenewal, lim Limits) List {
	if r == nil {
		return List{fieldErr("lease", "must be set")}
	}
	var l List
	l.add(Timestamp("lease.renewTime", r.GetRenewTime()))
	if d := r.GetLeaseDurationSeconds(); d < 1 || d > MaxLeaseDurationSeconds {
		l.add(fieldErr("lease.leaseDurationSeconds", "%d is not between 1 and %d", d, MaxLeaseDurationSeconds))
	}
	return l
}

// StatusReport checks a status report; paths start with "status.". Its
// times are checked as every client time is (Timestamp), whatever the
// node's clock says: a status is refused for what cannot be right, never
// for the node's clock being off.
func StatusReport(r *collectorv1.StatusReport, now time.Time, lim Limits) List {
	if r == nil {
		return List{fieldErr("status", "must be set")}
	}
	return NodeStatus("status", r.GetStatus(), now, lim)
}

// Leaving checks a leaving notice.
func Leaving(r *collectorv1.Leaving) List {
	if len(r.GetReason()) > MaxShortTextLength {
		return List{fieldErr("leaving.reason", "must be no more than %d characters", MaxShortTextLength)}
	}
	return nil
}
