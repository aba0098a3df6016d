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

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
)

// getWatch is `get nodes|pods -w`: the list as get prints it, then a line
// per change, in the same format, until the watch or the command ends (as
// kubectl get -w). The watch starts at the list's resource version, so no
// change between the two is lost.
func (c *command) getWatch(ctx context.Context, cl nodev1.NodeServiceClient, pods podv1.PodServiceClient) error {
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
	return fmt.Errorf("get -w: nodes and pods can be watched, not %q", typ)
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
	line, header, err := c.lineFormat(k)
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
func (c *command) lineFormat(k any) (func(proto.Message) (string, error), string, error) {
	format, arg, _ := strings.Cut(c.output, "=")
	switch format {
	case "", "wide":
		wide := format == "wide"
		switch k := k.(type) {
		case kind[*nodev1.Node]:
			head := k.head
			if wide {
				head += k.wideHead
			}
			return func(m proto.Message) (string, error) { return k.row(m.(*nodev1.Node), wide, time.Now()), nil }, head, nil
		case kind[*podv1.Pod]:
			head := k.head
			if wide {
				head += k.wideHead
			}
			return func(m proto.Message) (string, error) { return k.row(m.(*podv1.Pod), wide, time.Now()), nil }, head, nil
		}
	case "name":
		switch k := k.(type) {
		case kind[*nodev1.Node]:
			return func(m proto.Message) (string, error) { return k.name(m.(*nodev1.Node)) + "\n", nil }, "", nil
		case kind[*podv1.Pod]:
			return func(m proto.Message) (string, error) { return k.name(m.(*podv1.Pod)) + "\n", nil }, "", nil
		}
	case "json":
		return func(m proto.Message) (string, error) {
			b, err := protojson.Marshal(m)
			return string(b) + "\n", err
		}, "", nil
	case "yaml":
		return func(m proto.Message) (string, error) {
			b, err := protojson.Marshal(m)
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
		return func(m proto.Message) (string, error) {
			v, err := toJSON(m)
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
		return cols.row, cols.header(), nil
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
