// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package placement chooses the node of an unbound pod (spec §16.5): the
// few filters of upstream's default scheduler that matter for node health
// (pkg/scheduler/framework/plugins/nodeunschedulable and tainttoleration),
// and the fewest pods per node as the only score. It is a pure function of
// the node list and the pod list; the owners package runs it on the leader.
//
// Not a full scheduler, on purpose: no resources, ports, affinity, volume
// or topology filters, no preemption. nodepulse keeps workload records for
// an orchestrator above it; placement only keeps the seeds' promise that a
// replacement lands on a Ready, uncordoned, tolerated node.
package placement

import (
	"fmt"
	"sort"
	"strings"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/workloads/eviction"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/podlife"
)

// Upstream's filter reasons (framework plugins' ErrReason strings).
const (
	ReasonUnschedulable = "node(s) were unschedulable"
	ReasonNotReady      = "node(s) were not ready"
	// ReasonNoNodes is upstream's ErrNoNodesAvailable.
	ReasonNoNodes = "no nodes available to schedule pods"
)

// ConditionPodScheduled and its reason for a pod that fits nowhere.
const (
	ConditionPodScheduled  = "PodScheduled"
	ReasonUnschedulablePod = "Unschedulable"
)

// Result of Place: Node is set when the pod fits; otherwise Message says
// why, in upstream's FitError words ("0/3 nodes are available: ...").
type Result struct {
	Node    string
	Message string
}

// Place returns the node for pod among nodes, given the pods already bound
// (pods may include pod itself; unbound and terminal pods are not counted).
// A node fits when it is not cordoned (unless the pod tolerates
// unschedulable:NoSchedule), every NoSchedule and NoExecute taint is
// tolerated (tolerationSeconds ignored, as the scheduler does) and it is
// Ready. Among the fitting nodes the one with the fewest non-terminal pods
// wins, the name breaking ties, so every replica decides alike.
func Place(nodes []*nodev1.Node, pods []*podv1.Pod, pod *podv1.Pod) Result {
	if len(nodes) == 0 {
		return Result{Message: "0/0 nodes are available: " + ReasonNoNodes + "."}
	}
	count := map[string]int{}
	for _, p := range pods {
		if nn := p.GetSpec().GetNodeName(); nn != "" && !podlife.IsTerminal(p) {
			count[nn]++
		}
	}
	reasons := map[string]int{}
	best, bestN := "", 0
	for _, n := range nodes {
		if why := Fits(n, pod); why != "" {
			reasons[why]++
			continue
		}
		name := n.GetMetadata().GetName()
		c := count[name]
		if best == "" || c < bestN || (c == bestN && name < best) {
			best, bestN = name, c
		}
	}
	if best != "" {
		return Result{Node: best}
	}
	return Result{Message: FitError(len(nodes), reasons)}
}

// Fits returns "" when pod may go to n, else the first failing filter's
// reason, in upstream's filter order (NodeUnschedulable, then
// TaintToleration); Ready comes last: upstream relies on the condition
// taints alone, which the lifecycle controller keeps in step with Ready, so
// the last check only catches a node whose taints lag.
func Fits(n *nodev1.Node, pod *podv1.Pod) string {
	tols := pod.GetSpec().GetTolerations()
	if n.GetSpec().GetUnschedulable() {
		t := &nodev1.Taint{Key: nodemodel.TaintUnschedulable, Effect: nodemodel.NoSchedule}
		if !(eviction.Matcher{}).TolerationsTolerateTaint(tols, t) {
			return ReasonUnschedulable
		}
	}
	for _, t := range n.GetSpec().GetTaints() {
		if t.GetEffect() != nodemodel.NoSchedule && t.GetEffect() != nodemodel.NoExecute {
			continue
		}
		if !(eviction.Matcher{}).TolerationsTolerateTaint(tols, t) {
			return fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.GetKey(), t.GetValue())
		}
	}
	if nodemodel.ConditionStatus(n.GetStatus().GetConditions(), nodemodel.Ready) != nodemodel.True {
		return ReasonNotReady
	}
	return ""
}

// FitError is upstream's FitError.Error without the preemption part
// (nodepulse does not preempt): the reasons with their node counts, sorted
// as strings.
func FitError(total int, reasons map[string]int) string {
	parts := make([]string, 0, len(reasons))
	for r, c := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", c, r))
	}
	sort.Strings(parts)
	return fmt.Sprintf("0/%d nodes are available: %s.", total, strings.Join(parts, ", "))
}
