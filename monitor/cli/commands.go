package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/lifecycle"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

func (c *command) getNodes(ctx context.Context, cl nodev1.NodeServiceClient) error {
	var nodes []*nodev1.Node
	tok := ""
	for {
		r, err := cl.ListNodes(ctx, &nodev1.ListNodesRequest{LabelSelector: c.selector, ConditionSelector: c.condition, PageToken: tok})
		if err != nil {
			return err
		}
		nodes = append(nodes, r.GetNodes()...)
		if tok = r.GetNextPageToken(); tok == "" {
			break
		}
	}
	return c.print(nodes, true)
}

func (c *command) getNode(ctx context.Context, cl nodev1.NodeServiceClient, name string) error {
	r, err := cl.GetNode(ctx, &nodev1.GetNodeRequest{Name: name})
	if err != nil {
		return err
	}
	return c.print([]*nodev1.Node{r.GetNode()}, false)
}

var jsonOpts = protojson.MarshalOptions{Multiline: true, Indent: "    "}

// print writes nodes in the chosen format; list selects the List wrapper
// for json/yaml.
func (c *command) print(nodes []*nodev1.Node, list bool) error {
	switch c.output {
	case "", "wide":
		return printTable(c.out, nodes, c.output == "wide", time.Now())
	case "name":
		for _, n := range nodes {
			fmt.Fprintf(c.out, "node/%s\n", n.GetMetadata().GetName())
		}
		return nil
	case "json", "yaml":
		var doc []byte
		var err error
		if list {
			items := make([]json.RawMessage, len(nodes))
			for i, n := range nodes {
				if items[i], err = protojson.Marshal(n); err != nil {
					return err
				}
			}
			doc, err = json.MarshalIndent(struct {
				Kind  string            `json:"kind"`
				Items []json.RawMessage `json:"items"`
			}{"NodeList", items}, "", "    ")
		} else {
			doc, err = jsonOpts.Marshal(nodes[0])
		}
		if err != nil {
			return err
		}
		if c.output == "yaml" {
			if doc, err = yaml.JSONToYAML(doc); err != nil {
				return err
			}
			_, err = c.out.Write(doc)
			return err
		}
		_, err = fmt.Fprintln(c.out, string(doc))
		return err
	}
	return fmt.Errorf("-o %q: want wide, json, yaml or name", c.output)
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

func printTable(w io.Writer, nodes []*nodev1.Node, wide bool, now time.Time) error {
	if len(nodes) == 0 {
		_, err := fmt.Fprintln(w, "No nodes found.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	head := "NAME\tSTATUS\tAGE\tVERSION"
	if wide {
		head += "\tINTERNAL-IP\tOS-IMAGE\tKERNEL-VERSION\tZONE"
	}
	fmt.Fprintln(tw, head)
	for _, n := range nodes {
		age := "<unknown>"
		if ct := n.GetMetadata().GetCreationTimestamp(); ct != nil {
			age = HumanDuration(now.Sub(ct.AsTime()))
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s", n.GetMetadata().GetName(), NodeStatus(n), age, orNone(n.GetStatus().GetNodeInfo().GetReporterVersion()))
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
				orNone(lifecycle.ZoneName(lifecycle.ZoneKey(n.GetMetadata().GetLabels()))))
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// HumanDuration renders an age like kubectl: 45s, 5m30s, 45m, 3h20m, 30h,
// 3d5h, 45d, 2y.
func HumanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case d < 10*time.Minute:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case d < 3*time.Hour:
		return fmt.Sprintf("%dm", s/60)
	case d < 8*time.Hour:
		h, m := s/3600, (s%3600)/60
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", s/3600)
	case d < 8*24*time.Hour:
		dd, h := s/86400, (s%86400)/3600
		if h == 0 {
			return fmt.Sprintf("%dd", dd)
		}
		return fmt.Sprintf("%dd%dh", dd, h)
	case d < 2*365*24*time.Hour:
		return fmt.Sprintf("%dd", s/86400)
	}
	return fmt.Sprintf("%dy", s/(365*86400))
}

func (c *command) watch(ctx context.Context, cl nodev1.NodeServiceClient) error {
	s, err := cl.WatchNodes(ctx, &nodev1.WatchNodesRequest{LabelSelector: c.selector, ResourceVersion: c.rv})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "EVENT\tNAME\tSTATUS\tAGE\tVERSION\tRESOURCE-VERSION")
	tw.Flush()
	for {
		ev, err := s.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		n := ev.GetNode()
		if c.output == "json" {
			b, err := protojson.Marshal(ev)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.out, string(b))
			continue
		}
		age := "<unknown>"
		if ct := n.GetMetadata().GetCreationTimestamp(); ct != nil {
			age = HumanDuration(time.Since(ct.AsTime()))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ev.GetType(), n.GetMetadata().GetName(), NodeStatus(n), age,
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
	fmt.Fprintf(c.out, "%s: %s\n", name, r.GetSummary())
	for _, d := range r.GetDetails() {
		fmt.Fprintf(c.out, "  - %s\n", d)
	}
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

func printEvents(w io.Writer, evs []*nodev1.Event, now time.Time, indent string) {
	if len(evs) == 0 {
		fmt.Fprintln(w, indent+"<none>")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, indent+"TYPE\tREASON\tAGE\tFROM\tOBJECT\tMESSAGE")
	for _, e := range evs {
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s/%s\t%s\n", indent, e.GetType(), e.GetReason(), HumanDuration(now.Sub(e.GetLastTimestamp().AsTime())),
			e.GetSource(), strings.ToLower(e.GetInvolvedObject().GetKind()), e.GetInvolvedObject().GetName(), e.GetMessage())
	}
	tw.Flush()
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

func ts(t interface{ AsTime() time.Time }, present bool) string {
	if !present {
		return "<unset>"
	}
	return t.AsTime().Local().Format(time.RFC1123Z)
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
