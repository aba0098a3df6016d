package lifecycle

import (
	"sort"
	"strings"

	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// ZoneState of a zone (spec §6.6).
type ZoneState string

// Zone states.
const (
	ZoneInitial            ZoneState = "Initial"
	ZoneNormal             ZoneState = "Normal"
	ZonePartialDisruption  ZoneState = "PartialDisruption"
	ZoneFullDisruption     ZoneState = "FullDisruption"
	zoneSeparator                    = "\x00"
	notReadyPartialMinimum           = 3
)

// ZoneStates lists every state, for metrics.
var ZoneStates = []ZoneState{ZoneInitial, ZoneNormal, ZonePartialDisruption, ZoneFullDisruption}

// ZoneKey is region + "\x00" + zone from the legacy failure-domain labels,
// falling back to the topology labels; "" when the node has neither.
func ZoneKey(labels map[string]string) string {
	return ZoneKeyReusing(labels, "")
}

// ZoneKeyReusing is ZoneKey, returning prev itself when it is the key, so
// the health pass, which asks for every node's key every few seconds, does
// not build 100,000 equal strings each time.
func ZoneKeyReusing(labels map[string]string, prev string) string {
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

// ZoneName renders a zone key for people and metric labels: "region/zone",
// or "zone" without a region.
func ZoneName(key string) string {
	if key == "" {
		return ""
	}
	region, zone, _ := cutSep(key)
	if region == "" {
		return zone
	}
	return region + "/" + zone
}

func cutSep(key string) (string, string, bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return key[:i], key[i+1:], true
		}
	}
	return "", key, false
}

// ExcludedFromDisruption reports whether a node is left out of zone
// statistics (it still gets judged and tainted).
func ExcludedFromDisruption(labels map[string]string) bool {
	_, ok := labels[nodemodel.LabelExcludeDisruption]
	return ok
}

// ComputeZoneState classifies a zone from the Ready status (after this pass)
// of its nodes; "" (missing) counts as not ready. It returns the number of
// not-ready nodes and the state.
func (c Config) ComputeZoneState(readyStatuses []string) (int, ZoneState) {
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
		return notReady, ZoneFullDisruption
	case notReady >= notReadyPartialMinimum && float64(notReady)/float64(notReady+ready) >= c.UnhealthyZoneThreshold:
		return notReady, ZonePartialDisruption
	}
	return notReady, ZoneNormal
}

// ZoneQPS is the taint rate a zone of size nodes gets in state s.
func (c Config) ZoneQPS(s ZoneState, size int) float64 {
	switch s {
	case ZonePartialDisruption:
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
	States map[string]ZoneState
	// MasterDisruption: every zone was fully disrupted at the last pass.
	MasterDisruption bool
}

// DisruptionResult tells the controller what to change after a pass.
type DisruptionResult struct {
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
	Changed map[string]ZoneState
	// NotReady counts not-ready nodes per zone, for metrics.
	NotReady map[string]int
}

// Update applies one pass's Ready statuses per zone (nodes excluded from
// disruption checks left out).
func (d *Disruption) Update(cfg Config, zones map[string][]string) DisruptionResult {
	if d.States == nil {
		d.States = map[string]ZoneState{}
	}
	res := DisruptionResult{Limiters: map[string]float64{}, Changed: map[string]ZoneState{}, NotReady: map[string]int{}}
	newStates := map[string]ZoneState{}
	allAreFull := true
	for z, statuses := range zones {
		n, s := cfg.ComputeZoneState(statuses)
		res.NotReady[z] = n
		if s != ZoneFullDisruption {
			allAreFull = false
		}
		newStates[z] = s
		if _, ok := d.States[z]; !ok {
			d.States[z] = ZoneInitial
		}
	}
	allWereFull := true
	for _, z := range sortedKeys(d.States) {
		if _, ok := zones[z]; !ok {
			delete(d.States, z)
			continue
		}
		if d.States[z] != ZoneFullDisruption {
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
			if d.States[z] != ZoneFullDisruption {
				res.Changed[z] = ZoneFullDisruption
			}
			d.States[z] = ZoneFullDisruption
		}
		return res
	}
	if allWereFull {
		res.ExitMaster = d.MasterDisruption
		d.MasterDisruption = false
		for z := range d.States {
			res.Limiters[z] = cfg.ZoneQPS(newStates[z], len(zones[z]))
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
		res.Limiters[z] = cfg.ZoneQPS(s, len(zones[z]))
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
