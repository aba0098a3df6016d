// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
)

// getWatch is `get nodes|pods -w`: the list as get prints it, then a line
// per change, in the same format, until the watch or the command ends (as
// kubectl get -w). The watch starts at the list's resource version, so no
// change between the two is lost.
func (c *command) getWatch(ctx context.Context, conn grpc.ClientConnInterface) error {
	cl, pods := nodev1.NewNodeServiceClient(conn), podv1.NewPodServiceClient(conn)
	typ := c.args[1]
	name := c.argOr(2)
	lctx, cancel := context.WithTimeout(ctx, c.g.timeout)
	defer cancel()
	switch {
	case isNodes(typ):
		if c.condition != "" {
			return errors.New("get -w: --condition applies to lists only (watch events carry no condition filter)")
		}
		var rv string
		items, err := listAll(func(tok string) ([]*nodev1.Node, string, error) {
			r, err := cl.ListNodes(lctx, &nodev1.ListNodesRequest{LabelSelector: c.selector, PageToken: tok})
			if rv == "" {
				rv = r.GetResourceVersion()
			}
			return r.GetNodes(), r.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		s, err := cl.WatchNodes(ctx, &nodev1.WatchNodesRequest{LabelSelector: c.selector, ResourceVersion: rv})
		if err != nil {
			return err
		}
		keep := func(n *nodev1.Node) bool { return name == "" || n.GetMetadata().GetName() == name }
		return watchObjects(ctx, c, nodeKind, filter(items, keep), func() (string, *nodev1.Node, error) {
			ev, err := s.Recv()
			if err == nil && !keep(ev.GetNode()) {
				return "BOOKMARK", nil, nil
			}
			return ev.GetType(), ev.GetNode(), err
		})
	case typ == "pods" || typ == "pod" || typ == "po":
		// WatchPods has no label selector: the same selector filters here.
		sel, err := labels.Parse(c.selector)
		if err != nil {
			return fmt.Errorf("-l %q: %w", c.selector, err)
		}
		ns, podName := c.namespace, ""
		if name != "" {
			if ns, podName, err = c.podRef(name); err != nil {
				return err
			}
		}
		var rv string
		items, err := listAll(func(tok string) ([]*podv1.Pod, string, error) {
			r, err := pods.ListPods(lctx, &podv1.ListPodsRequest{Namespace: ns, NodeName: c.node, LabelSelector: c.selector, PageToken: tok})
			if rv == "" {
				rv = r.GetResourceVersion()
			}
			return r.GetPods(), r.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		s, err := pods.WatchPods(ctx, &podv1.WatchPodsRequest{Namespace: ns, NodeName: c.node, ResourceVersion: rv})
		if err != nil {
			return err
		}
		keep := func(p *podv1.Pod) bool {
			return (podName == "" || p.GetMetadata().GetName() == podName) && sel.Matches(labels.Set(p.GetMetadata().GetLabels()))
		}
		return watchObjects(ctx, c, podKind, filter(items, keep), func() (string, *podv1.Pod, error) {
			ev, err := s.Recv()
			if err == nil && !keep(ev.GetPod()) {
				return "BOOKMARK", nil, nil
			}
			return ev.GetType(), ev.GetPod(), err
		})
	}
	if n, ok := ownerNouns[typ]; ok && n.kind != appsv1.WorkloadKind_WORKLOAD_KIND_UNSPECIFIED {
		return c.watchWorkloads(ctx, lctx, appsv1.NewWorkloadServiceClient(conn), n.kind, name)
	}
	return fmt.Errorf("get -w: nodes, pods, replicasets, statefulsets and daemonsets can be watched, not %q", typ)
}

// watchWorkloads is `get rs|sts|ds -w`: the owners of one kind, unwrapped.
func (c *command) watchWorkloads(ctx, lctx context.Context, wl appsv1.WorkloadServiceClient, k appsv1.WorkloadKind, name string) error {
	ns, wlName := c.namespace, ""
	if name != "" {
		var err error
		if ns, wlName, err = c.podRef(name); err != nil {
			return err
		}
	}
	var rv string
	items, err := listAll(func(tok string) ([]*appsv1.Workload, string, error) {
		r, err := wl.ListWorkloads(lctx, &appsv1.ListWorkloadsRequest{Kind: k, Namespace: ns, LabelSelector: c.selector, PageToken: tok})
		if rv == "" {
			rv = r.GetResourceVersion()
		}
		return r.GetWorkloads(), r.GetNextPageToken(), err
	})
	if err != nil {
		return err
	}
	sel, err := labels.Parse(c.selector)
	if err != nil {
		return fmt.Errorf("-l %q: %w", c.selector, err)
	}
	s, err := wl.WatchWorkloads(ctx, &appsv1.WatchWorkloadsRequest{Kind: k, Namespace: ns, ResourceVersion: rv})
	if err != nil {
		return err
	}
	keep := func(w *appsv1.Workload) bool {
		md := workloadMeta(w)
		return (wlName == "" || md.GetName() == wlName) && sel.Matches(labels.Set(md.GetLabels()))
	}
	next := func() (string, *appsv1.Workload, error) {
		ev, err := s.Recv()
		if err == nil && !keep(ev.GetWorkload()) {
			return "BOOKMARK", nil, nil
		}
		return ev.GetType(), ev.GetWorkload(), err
	}
	items = filter(items, keep)
	switch k {
	case appsv1.WorkloadKind_WORKLOAD_KIND_REPLICA_SET:
		return watchObjects(ctx, c, rsKind, unwrap(items, (*appsv1.Workload).GetReplicaSet), unwrapNext(next, (*appsv1.Workload).GetReplicaSet))
	case appsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET:
		return watchObjects(ctx, c, stsKind, unwrap(items, (*appsv1.Workload).GetStatefulSet), unwrapNext(next, (*appsv1.Workload).GetStatefulSet))
	}
	return watchObjects(ctx, c, dsKind, unwrap(items, (*appsv1.Workload).GetDaemonSet), unwrapNext(next, (*appsv1.Workload).GetDaemonSet))
}

func workloadMeta(w *appsv1.Workload) *nodev1.ObjectMeta {
	switch {
	case w.GetReplicaSet() != nil:
		return w.GetReplicaSet().GetMetadata()
	case w.GetStatefulSet() != nil:
		return w.GetStatefulSet().GetMetadata()
	}
	return w.GetDaemonSet().GetMetadata()
}

func unwrap[T any](ws []*appsv1.Workload, get func(*appsv1.Workload) T) []T {
	out := make([]T, len(ws))
	for i, w := range ws {
		out[i] = get(w)
	}
	return out
}

func unwrapNext[T any](next func() (string, *appsv1.Workload, error), get func(*appsv1.Workload) T) func() (string, T, error) {
	return func() (string, T, error) {
		typ, w, err := next()
		return typ, get(w), err
	}
}

func filter[T any](items []T, keep func(T) bool) []T {
	var out []T
	for _, it := range items {
		if keep(it) {
			out = append(out, it)
		}
	}
	return out
}

// watchObjects prints the initial items, then every changed object next
// returns, until next fails or ctx ends (a clean end: Ctrl-C).
func watchObjects[T proto.Message](ctx context.Context, c *command, k kind[T], items []T, next func() (string, T, error)) error {
	line, header, err := lineFormat(c, k)
	if err != nil {
		return err
	}
	var al aligned
	al.w = c.out
	tabular := header != ""
	if tabular {
		lines := []string{header}
		for _, it := range items {
			l, err := line(it)
			if err != nil {
				return err
			}
			lines = append(lines, l)
		}
		al.seed(lines)
		for _, l := range lines {
			al.print(l)
		}
	} else {
		for _, it := range items {
			l, err := line(it)
			if err != nil {
				return err
			}
			fmt.Fprint(c.out, l)
		}
	}
	for {
		typ, obj, err := next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if typ == "BOOKMARK" {
			continue
		}
		l, err := line(obj)
		if err != nil {
			return err
		}
		if tabular {
			al.print(l)
		} else {
			fmt.Fprint(c.out, l)
		}
	}
}

// lineFormat returns how -o prints one object of a stream: a table row
// (with the header to print first), or a complete text (name, one JSON
// object a line, a YAML document, a jsonpath result).
func lineFormat[T proto.Message](c *command, k kind[T]) (func(T) (string, error), string, error) {
	format, arg, _ := strings.Cut(c.output, "=")
	switch format {
	case "", "wide":
		wide := format == "wide"
		head := k.head
		if wide {
			head += k.wideHead
		}
		return func(it T) (string, error) { return k.row(it, wide, time.Now()), nil }, head, nil
	case "name":
		return func(it T) (string, error) { return k.name(it) + "\n", nil }, "", nil
	case "json":
		return func(it T) (string, error) {
			b, err := protojson.Marshal(it)
			return string(b) + "\n", err
		}, "", nil
	case "yaml":
		return func(it T) (string, error) {
			b, err := protojson.Marshal(it)
			if err != nil {
				return "", err
			}
			y, err := yaml.JSONToYAML(b)
			return "---\n" + string(y), err
		}, "", nil
	case "jsonpath":
		j, err := parseJSONPath(arg)
		if err != nil {
			return nil, "", err
		}
		return func(it T) (string, error) {
			v, err := toJSON(it)
			if err != nil {
				return "", err
			}
			var b strings.Builder
			err = j.Execute(&b, v)
			return b.String(), err
		}, "", nil
	case "custom-columns":
		cols, err := parseColumns(arg)
		if err != nil {
			return nil, "", err
		}
		return func(it T) (string, error) { return cols.row(it) }, cols.header(), nil
	}
	return nil, "", fmt.Errorf("-o %q: want wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=SPEC", c.output)
}

// aligned writes tab-separated rows as columns that keep the widths of
// the header and the initial rows across rows printed one at a time (a
// tabwriter aligns only what it buffers, and a watch cannot wait). A wider
// cell shifts its own row only, so later rows still line up with the
// header.
type aligned struct {
	w      io.Writer
	widths []int
}

func (a *aligned) seed(lines []string) {
	for _, l := range lines {
		for i, cell := range strings.Split(l, "\t") {
			if i >= len(a.widths) {
				a.widths = append(a.widths, 0)
			}
			a.widths[i] = max(a.widths[i], utf8.RuneCountInString(cell))
		}
	}
}

func (a *aligned) print(l string) {
	cells := strings.Split(l, "\t")
	var b strings.Builder
	for i, cell := range cells {
		b.WriteString(cell)
		if i < len(cells)-1 {
			pad := 3
			if i < len(a.widths) {
				pad = max(a.widths[i]-utf8.RuneCountInString(cell)+3, 1)
			}
			b.WriteString(strings.Repeat(" ", pad))
		}
	}
	fmt.Fprintln(a.w, b.String())
}
