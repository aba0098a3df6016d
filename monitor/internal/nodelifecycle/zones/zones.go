// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package zones owns the zone half of the node lifecycle controller (spec
// §6.6): which zone a node is in, and the zone state machine that turns
// each pass's Ready statuses per zone into zone states, NoExecute taint
// rates and the cluster-wide master disruption mode. It is pure: the
// controller feeds it one pass's statuses and applies what it returns.
package zones

import (
	"sort"
	"strings"

	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// State of a zone (spec §6.6).
type State string

// Zone states.
const (
	Initial                State = "Initial"
	Normal                 State = "Normal"
	PartialDisruption      State = "PartialDisruption"
	FullDisruption         State = "FullDisruption"
	zoneSeparator                = "\x00"
	notReadyPartialMinimum       = 3
)

// States lists every state, for metrics.
var States = []State{Initial, Normal, PartialDisruption, FullDisruption}

// KeyReusing is nodemodel.ZoneKey (the same labels, the same key; a test
// holds them together), returning prev itself when it is the key, so the
// health pass, which asks for every node's key every few seconds, does not
// build 100,000 equal strings each time.
func KeyReusing(labels map[string]string, prev string) string {
	region, zone := labels[nodemodel.LabelRegionLegacy], labels[nodemodel.LabelZoneLegacy]
	if region == "" {
		region = labels[nodemodel.LabelRegion]
	}
	if zone == "" {
		zone = labels[nodemodel.LabelZone]
	}
	if region == "" && zone == "" {
		return ""
	}
	if len(prev) == len(region)+len(zoneSeparator)+len(zone) && strings.HasPrefix(prev, region) &&
		prev[len(region):len(region)+len(zoneSeparator)] == zoneSeparator && strings.HasSuffix(prev, zone) {
		return prev
	}
	return region + zoneSeparator + zone
}

// Excluded reports whether a node is left out of zone statistics (it still
// gets judged and tainted).
func Excluded(labels map[string]string) bool {
	_, ok := labels[nodemodel.LabelExcludeDisruption]
	return ok
}

// Classify classifies a zone from the Ready status (after this pass)
// of its nodes; "" (missing) counts as not ready. It returns the number of
// not-ready nodes and the state.
func Classify(c lifecycle.Config, readyStatuses []string) (int, State) {
	ready, notReady := 0, 0
	for _, s := range readyStatuses {
		if s == nodemodel.True {
			ready++
		} else {
			notReady++
		}
	}
	switch {
	case ready == 0 && notReady > 0:
		return notReady, FullDisruption
	case notReady >= notReadyPartialMinimum && float64(notReady)/float64(notReady+ready) >= c.UnhealthyZoneThreshold:
		return notReady, PartialDisruption
	}
	return notReady, Normal
}

// QPS is the taint rate a zone of size nodes gets in state s.
func QPS(c lifecycle.Config, s State, size int) float64 {
	switch s {
	case PartialDisruption:
		if size > c.LargeClusterSizeThreshold {
			return c.SecondaryEvictionRate
		}
		return 0
	}
	// Normal, and FullDisruption while some zone is healthy: the problem is
	// most likely the zone itself, so its nodes are tainted at the normal rate.
	return c.EvictionRate
}

// Disruption tracks zone states across passes (upstream handleDisruption).
type Disruption struct {
	// States of the zones seen at the last pass.
	States map[string]State
	// MasterDisruption: every zone was fully disrupted at the last pass.
	MasterDisruption bool
}

// Result tells the controller what to change after a pass.
type Result struct {
	// EnterMaster: every zone is now fully disrupted. Remove the NoExecute
	// taints of every node and stop every zone's queue (QPS 0): when no node
	// anywhere is ready, the monitor's own view is the likelier failure.
	EnterMaster bool
	// ExitMaster: leaving that mode. Reset every node's probe to now and apply
	// the per-zone limits.
	ExitMaster bool
	// Limiters maps each zone whose rate must change to its new QPS.
	Limiters map[string]float64
	// Changed lists zones whose state changed (for logs), with the new state.
	Changed map[string]State
	// NotReady counts not-ready nodes per zone, for metrics.
	NotReady map[string]int
}

// Update applies one pass's Ready statuses per zone (nodes excluded from
// disruption checks left out).
func (d *Disruption) Update(cfg lifecycle.Config, zones map[string][]string) Result {
	if d.States == nil {
		d.States = map[string]State{}
	}
	res := Result{Limiters: map[string]float64{}, Changed: map[string]State{}, NotReady: map[string]int{}}
	newStates := map[string]State{}
	allAreFull := true
	for z, statuses := range zones {
		n, s := Classify(cfg, statuses)
		res.NotReady[z] = n
		if s != FullDisruption {
			allAreFull = false
		}
		newStates[z] = s
		if _, ok := d.States[z]; !ok {
			d.States[z] = Initial
		}
	}
	allWereFull := true
	for _, z := range sortedKeys(d.States) {
		if _, ok := zones[z]; !ok {
			delete(d.States, z)
			continue
		}
		if d.States[z] != FullDisruption {
			allWereFull = false
		}
	}
	if allAreFull && allWereFull {
		// Still in master disruption (or no zone at all): nothing changes.
		return res
	}
	if allAreFull {
		res.EnterMaster = true
		d.MasterDisruption = true
		for z := range d.States {
			res.Limiters[z] = 0
			if d.States[z] != FullDisruption {
				res.Changed[z] = FullDisruption
			}
			d.States[z] = FullDisruption
		}
		return res
	}
	if allWereFull {
		res.ExitMaster = d.MasterDisruption
		d.MasterDisruption = false
		for z := range d.States {
			res.Limiters[z] = QPS(cfg, newStates[z], len(zones[z]))
			if d.States[z] != newStates[z] {
				res.Changed[z] = newStates[z]
			}
			d.States[z] = newStates[z]
		}
		return res
	}
	for z, old := range d.States {
		s := newStates[z]
		if old == s {
			continue
		}
		res.Limiters[z] = QPS(cfg, s, len(zones[z]))
		res.Changed[z] = s
		d.States[z] = s
	}
	return res
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
