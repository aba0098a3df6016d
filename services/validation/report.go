// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package validation

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
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

// TimeFloor is the earliest time a client may send in a field that may be
// legitimately old (a condition's lastTransitionTime, a taint's
// timeAdded, a pod condition's times): a clock that was never set reads
// 1970 or the year 1, and a date from then would make a condition look
// settled for decades. Fields that claim to be recent have a tighter
// bound (Recent). A fixed date rather than the node's first registration:
// a reporter keeps its conditions' transition times across the deletion
// and re-registration of its node, which would then predate the node.
var TimeFloor = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// Recent checks a timestamp that claims to be recent (a renewTime, a
// condition's lastHeartbeatTime): set, valid, at most skew in the future of
// now, and at most skew older than now and than last, the node's last
// accepted one (zero: none). The same skew both ways: a reporter whose
// clock is within skew of the collector's is never refused, and one
// further behind is refused as one further ahead always was.
func Recent(field string, ts *timestamppb.Timestamp, last, now time.Time, skew time.Duration) *FieldError {
	if e := Timestamp(field, ts, now, skew); e != nil {
		return e
	}
	t := ts.AsTime()
	if floor := now.Add(-skew); t.Before(floor) {
		return fieldErr(field, "%s is %s in the past, more than the allowed clock skew of %s (not before %s)",
			t.UTC().Format(time.RFC3339Nano), now.Sub(t).Round(time.Millisecond), skew, floor.UTC().Format(time.RFC3339Nano))
	}
	if floor := last.Add(-skew); !last.IsZero() && t.Before(floor) {
		return fieldErr(field, "%s is %s before the node's last accepted %s, more than the allowed clock skew of %s (not before %s)",
			t.UTC().Format(time.RFC3339Nano), last.Sub(t).Round(time.Millisecond), last.UTC().Format(time.RFC3339Nano), skew, floor.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// NotBefore checks that a set, valid timestamp is not before floor
// (TimeFloor); nil and invalid ones are other checks' business.
func NotBefore(field string, ts *timestamppb.Timestamp, floor time.Time) *FieldError {
	if ts == nil || ts.CheckValid() != nil {
		return nil
	}
	if t := ts.AsTime(); t.Before(floor) {
		return fieldErr(field, "%s is before %s: not a time a set clock reads", t.UTC().Format(time.RFC3339Nano), floor.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

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
	for i, t := range r.GetRegisterWithTaints() {
		l.add(NotBefore(index("register.registerWithTaints", i)+".timeAdded", t.GetTimeAdded(), TimeFloor))
	}
	if len(r.GetReporterVersion()) > MaxShortTextLength {
		l.add(fieldErr("register.reporterVersion", "must be no more than %d characters", MaxShortTextLength))
	}
	if len(r.GetReporterId()) > MaxShortTextLength {
		l.add(fieldErr("register.reporterId", "must be no more than %d characters", MaxShortTextLength))
	}
	return l
}

// LeaseRenewal checks a renewal against now and prev, the node's previous
// accepted renewTime (zero when none): renewTime within the allowed skew of
// now both ways, and not more than that before prev (Recent); the duration
// in 1..3600 seconds. A renewTime somewhat before prev is accepted (a
// reporter's clock stepped back, within the skew): the caller keeps what it
// forwards advancing.
func LeaseRenewal(r *collectorv1.LeaseRenewal, prev, now time.Time, lim Limits) List {
	if r == nil {
		return List{fieldErr("lease", "must be set")}
	}
	var l List
	l.add(Recent("lease.renewTime", r.GetRenewTime(), prev, now, lim.MaxClockSkew))
	if d := r.GetLeaseDurationSeconds(); d < 1 || d > MaxLeaseDurationSeconds {
		l.add(fieldErr("lease.leaseDurationSeconds", "%d is not between 1 and %d", d, MaxLeaseDurationSeconds))
	}
	return l
}

// StatusReport checks a status report; paths start with "status.". On top
// of NodeStatus, each condition's lastHeartbeatTime is Recent (against now
// and lastHeartbeat, the heartbeat of the node's last accepted report, zero
// when none) and its lastTransitionTime not before TimeFloor.
func StatusReport(r *collectorv1.StatusReport, lastHeartbeat, now time.Time, lim Limits) List {
	if r == nil {
		return List{fieldErr("status", "must be set")}
	}
	l := NodeStatus("status", r.GetStatus(), now, lim)
	if len(l) > 0 {
		return l
	}
	for i, c := range r.GetStatus().GetConditions() {
		if c.LastHeartbeatTime != nil {
			if e := Recent(".lastHeartbeatTime", c.GetLastHeartbeatTime(), lastHeartbeat, now, lim.MaxClockSkew); e != nil {
				l = append(l, List{e}.within(index("status.conditions", i))...)
			}
		}
		if e := NotBefore(".lastTransitionTime", c.GetLastTransitionTime(), TimeFloor); e != nil {
			l = append(l, List{e}.within(index("status.conditions", i))...)
		}
	}
	return l
}

// podTimes checks that a pod status a reporter writes carries no condition
// time before TimeFloor (pod condition times may be old: a pod Ready
// since the node booted).
func podTimes(field string, st *podv1.PodStatus) List {
	var l List
	for i, c := range st.GetConditions() {
		f := index(field+".conditions", i)
		l.add(NotBefore(f+".lastTransitionTime", c.GetLastTransitionTime(), TimeFloor))
		l.add(NotBefore(f+".lastProbeTime", c.GetLastProbeTime(), TimeFloor))
	}
	return l
}

// Leaving checks a leaving notice.
func Leaving(r *collectorv1.Leaving) List {
	if len(r.GetReason()) > MaxShortTextLength {
		return List{fieldErr("leaving.reason", "must be no more than %d characters", MaxShortTextLength)}
	}
	return nil
}
