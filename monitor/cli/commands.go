// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// nodeKind is how get prints nodes.
var nodeKind = kind[*nodev1.Node]{
	name:     func(n *nodev1.Node) string { return "node/" + n.GetMetadata().GetName() },
	list:     "NodeList",
	none:     "No nodes found.",
	head:     "NAME\tSTATUS\tAGE\tVERSION",
	wideHead: "\tINTERNAL-IP\tOS-IMAGE\tKERNEL-VERSION\tZONE",
	row:      nodeRow,
}

func (c *command) getNodes(ctx context.Context, cl nodev1.NodeServiceClient) error {
	nodes, err := listAll(func(tok string) ([]*nodev1.Node, string, error) {
		r, err := cl.ListNodes(ctx, &nodev1.ListNodesRequest{LabelSelector: c.selector, ConditionSelector: c.condition, PageToken: tok})
		return r.GetNodes(), r.GetNextPageToken(), err
	})
	if err != nil {
		return err
	}
	return printObjects(c, nodeKind, nodes, true)
}

func (c *command) getNode(ctx context.Context, cl nodev1.NodeServiceClient, name string) error {
	r, err := cl.GetNode(ctx, &nodev1.GetNodeRequest{Name: name})
	if err != nil {
		return err
	}
	return printObjects(c, nodeKind, []*nodev1.Node{r.GetNode()}, false)
}

// NodeStatus is the STATUS column, as kubectl prints it.
func NodeStatus(n *nodev1.Node) string {
	s := "Unknown"
	if r := nodemodel.FindCondition(n.GetStatus().GetConditions(), nodemodel.Ready); r != nil {
		s = "NotReady"
		if r.GetStatus() == nodemodel.True {
			s = "Ready"
		}
	}
	if n.GetSpec().GetUnschedulable() {
		s += ",SchedulingDisabled"
	}
	return s
}

func nodeRow(n *nodev1.Node, wide bool, now time.Time) string {
	row := fmt.Sprintf("%s\t%s\t%s\t%s", n.GetMetadata().GetName(), NodeStatus(n), age(n.GetMetadata().GetCreationTimestamp(), now), orNone(n.GetStatus().GetNodeInfo().GetReporterVersion()))
	if wide {
		ip := "<none>"
		for _, a := range n.GetStatus().GetAddresses() {
			if a.GetType() == nodemodel.AddressInternalIP {
				ip = a.GetAddress()
				break
			}
		}
		info := n.GetStatus().GetNodeInfo()
		row += fmt.Sprintf("\t%s\t%s\t%s\t%s", ip, orNone(info.GetOsImage()), orNone(info.GetKernelVersion()),
			orNone(nodemodel.ZoneName(nodemodel.ZoneKey(n.GetMetadata().GetLabels()))))
	}
	return row
}

// watch is `watch nodes`: every event, as a table row with its EVENT and
// RESOURCE-VERSION, or (-o json) as one JSON object a line and nothing
// else, so the output can be piped to jq.
func (c *command) watch(ctx context.Context, cl nodev1.NodeServiceClient) error {
	if c.output != "" && c.output != "json" && c.output != "name" {
		return fmt.Errorf("watch: -o %q: want json or name (or no -o for the table)", c.output)
	}
	s, err := cl.WatchNodes(ctx, &nodev1.WatchNodesRequest{LabelSelector: c.selector, ResourceVersion: c.rv})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.out, 0, 8, 3, ' ', 0)
	if c.output == "" {
		fmt.Fprintln(tw, "EVENT\tNAME\tSTATUS\tAGE\tVERSION\tRESOURCE-VERSION")
		tw.Flush()
	}
	for {
		ev, err := s.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		n := ev.GetNode()
		switch c.output {
		case "json":
			b, err := protojson.Marshal(ev)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.out, string(b))
			continue
		case "name":
			if ev.GetType() != "BOOKMARK" {
				fmt.Fprintf(c.out, "%s node/%s\n", ev.GetType(), n.GetMetadata().GetName())
			}
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ev.GetType(), n.GetMetadata().GetName(), NodeStatus(n), age(n.GetMetadata().GetCreationTimestamp(), time.Now()),
			orNone(n.GetStatus().GetNodeInfo().GetReporterVersion()), ev.GetResourceVersion())
		tw.Flush()
	}
}

func (c *command) cordon(ctx context.Context, cl nodev1.NodeServiceClient, name string, on bool) error {
	var err error
	if on {
		_, err = cl.CordonNode(ctx, &nodev1.CordonNodeRequest{Name: name})
	} else {
		_, err = cl.UncordonNode(ctx, &nodev1.UncordonNodeRequest{Name: name})
	}
	if err != nil {
		return err
	}
	verb := "cordoned"
	if !on {
		verb = "uncordoned"
	}
	fmt.Fprintf(c.out, "node/%s %s\n", name, verb)
	return nil
}

// ParseTaintArg parses "key[=value]:Effect" (add) or "key[:Effect]-" (remove).
func ParseTaintArg(s string) (t *nodev1.Taint, remove bool, err error) {
	if rest, ok := strings.CutSuffix(s, "-"); ok {
		key, effect, _ := strings.Cut(rest, ":")
		if key == "" {
			return nil, false, fmt.Errorf("taint %q: want key[:Effect]-", s)
		}
		return &nodev1.Taint{Key: key, Effect: effect}, true, nil
	}
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || effect == "" {
		return nil, false, fmt.Errorf("taint %q: want key[=value]:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute", s)
	}
	key, value, _ := strings.Cut(kv, "=")
	if key == "" {
		return nil, false, fmt.Errorf("taint %q: empty key", s)
	}
	return &nodev1.Taint{Key: key, Value: value, Effect: effect}, false, nil
}

func (c *command) taint(ctx context.Context, cl nodev1.NodeServiceClient, name, arg string) error {
	t, remove, err := ParseTaintArg(arg)
	if err != nil {
		return err
	}
	if remove {
		_, err = cl.RemoveTaint(ctx, &nodev1.RemoveTaintRequest{Name: name, Key: t.GetKey(), Effect: t.GetEffect()})
	} else {
		_, err = cl.AddTaint(ctx, &nodev1.AddTaintRequest{Name: name, Taint: t})
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "node/%s %s\n", name, map[bool]string{true: "untainted", false: "tainted"}[remove])
	return nil
}

func (c *command) explain(ctx context.Context, cl nodev1.NodeServiceClient, name string) error {
	r, err := cl.ExplainNode(ctx, &nodev1.ExplainNodeRequest{Name: name})
	if err != nil {
		return err
	}
	printExplanation(c.out, name, r.GetSummary(), r.GetDetails())
	return nil
}

func (c *command) events(ctx context.Context, cl nodev1.NodeServiceClient, name string) error {
	req := &nodev1.ListEventsRequest{}
	if name != "" {
		req.Kind, req.Name = "Node", name
	}
	r, err := cl.ListEvents(ctx, req)
	if err != nil {
		return err
	}
	printEvents(c.out, r.GetEvents(), time.Now(), "")
	return nil
}

func (c *command) describe(ctx context.Context, cl nodev1.NodeServiceClient, name string) error {
	r, err := cl.GetNode(ctx, &nodev1.GetNodeRequest{Name: name})
	if err != nil {
		return err
	}
	n := r.GetNode()
	lease, lerr := cl.GetLease(ctx, &nodev1.GetLeaseRequest{Name: name})
	ex, xerr := cl.ExplainNode(ctx, &nodev1.ExplainNodeRequest{Name: name})
	evs, eerr := cl.ListEvents(ctx, &nodev1.ListEventsRequest{Kind: "Node", Name: name, Limit: 20})
	DescribeNode(c.out, time.Now(), n, lease, ex, evs.GetEvents())
	return errors.Join(ignoreNotFound(lerr), xerr, eerr)
}

func ignoreNotFound(err error) error {
	if err != nil && strings.Contains(err.Error(), "NotFound") {
		return nil
	}
	return err
}

// DescribeNode writes the kubectl-describe-like view of a node.
func DescribeNode(w io.Writer, now time.Time, n *nodev1.Node, lease *nodev1.GetLeaseResponse, ex *nodev1.ExplainNodeResponse, evs []*nodev1.Event) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	md := n.GetMetadata()
	fmt.Fprintf(tw, "Name:\t%s\n", md.GetName())
	kv := func(title string, m map[string]string) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(keys) == 0 {
			fmt.Fprintf(tw, "%s:\t<none>\n", title)
			return
		}
		for i, k := range keys {
			t := ""
			if i == 0 {
				t = title + ":"
			}
			fmt.Fprintf(tw, "%s\t%s=%s\n", t, k, m[k])
		}
	}
	kv("Labels", md.GetLabels())
	kv("Annotations", md.GetAnnotations())
	fmt.Fprintf(tw, "CreationTimestamp:\t%s\n", ts(md.GetCreationTimestamp(), md.GetCreationTimestamp() != nil))
	if len(n.GetSpec().GetTaints()) == 0 {
		fmt.Fprintf(tw, "Taints:\t<none>\n")
	}
	for i, t := range n.GetSpec().GetTaints() {
		title := ""
		if i == 0 {
			title = "Taints:"
		}
		s := t.GetKey()
		if t.GetValue() != "" {
			s += "=" + t.GetValue()
		}
		fmt.Fprintf(tw, "%s\t%s:%s\n", title, s, t.GetEffect())
	}
	fmt.Fprintf(tw, "Unschedulable:\t%v\n", n.GetSpec().GetUnschedulable())
	if l := lease.GetLease(); l != nil || lease.GetObservedRenewTime() != nil {
		fmt.Fprintf(tw, "Lease:\t\n")
		fmt.Fprintf(tw, "  HolderIdentity:\t%s\n", orNone(l.GetSpec().GetHolderIdentity()))
		fmt.Fprintf(tw, "  AcquireTime:\t%s\n", ts(l.GetSpec().GetAcquireTime(), l.GetSpec().GetAcquireTime() != nil))
		fmt.Fprintf(tw, "  RenewTime (stored):\t%s\n", ts(l.GetSpec().GetRenewTime(), l.GetSpec().GetRenewTime() != nil))
		fmt.Fprintf(tw, "  RenewTime (live):\t%s\n", ts(lease.GetObservedRenewTime(), lease.GetObservedRenewTime() != nil))
		fmt.Fprintf(tw, "  Collector:\t%s\n", orNone(lease.GetCollector()))
	} else {
		fmt.Fprintf(tw, "Lease:\t<none>\n")
	}
	tw.Flush()

	fmt.Fprintln(w, "Conditions:")
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage")
	fmt.Fprintln(tw, "  ----\t------\t-----------------\t------------------\t------\t-------")
	for _, c := range n.GetStatus().GetConditions() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", c.GetType(), c.GetStatus(), ts(c.GetLastHeartbeatTime(), c.GetLastHeartbeatTime() != nil),
			ts(c.GetLastTransitionTime(), c.GetLastTransitionTime() != nil), c.GetReason(), c.GetMessage())
	}
	tw.Flush()
	fmt.Fprintln(w, "Addresses:")
	for _, a := range n.GetStatus().GetAddresses() {
		fmt.Fprintf(w, "  %s:  %s\n", a.GetType(), a.GetAddress())
	}
	res := func(title string, m map[string]string) {
		fmt.Fprintln(w, title+":")
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		rtw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, k := range keys {
			fmt.Fprintf(rtw, "  %s:\t%s\n", k, m[k])
		}
		rtw.Flush()
	}
	res("Capacity", n.GetStatus().GetCapacity())
	res("Allocatable", n.GetStatus().GetAllocatable())
	info := n.GetStatus().GetNodeInfo()
	fmt.Fprintln(w, "System Info:")
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, p := range [][2]string{{"Machine ID", info.GetMachineId()}, {"System UUID", info.GetSystemUuid()}, {"Boot ID", info.GetBootId()},
		{"Kernel Version", info.GetKernelVersion()}, {"OS Image", info.GetOsImage()}, {"Operating System", info.GetOperatingSystem()},
		{"Architecture", info.GetArchitecture()}, {"Container Runtime Version", info.GetContainerRuntimeVersion()}, {"Reporter Version", info.GetReporterVersion()}} {
		fmt.Fprintf(tw, "  %s:\t%s\n", p[0], p[1])
	}
	tw.Flush()
	if ex != nil {
		fmt.Fprintln(w, "Explanation:")
		fmt.Fprintf(w, "  %s\n", ex.GetSummary())
		for _, d := range ex.GetDetails() {
			fmt.Fprintf(w, "  - %s\n", d)
		}
	}
	fmt.Fprintln(w, "Events:")
	printEvents(w, evs, now, "  ")
}
