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

// LeaseRenewal checks a renewal against now and the previous accepted
// renewTime of the same node (zero when none): renewTime set, not more than
// the allowed skew in the future and not before the previous one (a renewal
// that goes backwards would make the monitor see no progress, or worse,
// replay an old heartbeat); the duration in 1..3600 seconds.
func LeaseRenewal(r *collectorv1.LeaseRenewal, prev, now time.Time, lim Limits) List {
	if r == nil {
		return List{fieldErr("lease", "must be set")}
	}
	var l List
	if e := Timestamp("lease.renewTime", r.GetRenewTime(), now, lim.MaxClockSkew); e != nil {
		l.add(e)
	} else if t := r.GetRenewTime().AsTime(); !prev.IsZero() && t.Before(prev) {
		l.add(fieldErr("lease.renewTime", "%s is before the previous renewal %s: renewTime must not go backwards",
			t.UTC().Format(time.RFC3339Nano), prev.UTC().Format(time.RFC3339Nano)))
	}
	if d := r.GetLeaseDurationSeconds(); d < 1 || d > MaxLeaseDurationSeconds {
		l.add(fieldErr("lease.leaseDurationSeconds", "%d is not between 1 and %d", d, MaxLeaseDurationSeconds))
	}
	return l
}

// StatusReport checks a status report; paths start with "status.".
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
