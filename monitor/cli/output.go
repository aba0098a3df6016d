// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/yaml"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

var jsonOpts = protojson.MarshalOptions{Multiline: true, Indent: "    "}

// kind is what the output of get needs to know about one kind of object.
type kind[T proto.Message] struct {
	// name is the "kind/name" line of -o name.
	name func(T) string
	// list is the kind of the json/yaml list document ("NodeList").
	list string
	// none is the table's line for an empty list ("No nodes found.").
	none string
	// head is the table's header, wideHead what -o wide adds to it
	// (tab-separated).
	head, wideHead string
	// row is an object's table row (tab-separated).
	row func(it T, wide bool, now time.Time) string
}

// table writes the default or the wide table of items.
func (k kind[T]) table(w io.Writer, items []T, wide bool, now time.Time) error {
	rows := make([]string, 0, len(items))
	for _, it := range items {
		rows = append(rows, k.row(it, wide, now))
	}
	return writeTable(w, k.none, k.head, k.wideHead, wide, rows)
}

// listAll follows a list call's page tokens to the end.
func listAll[T any](page func(token string) ([]T, string, error)) ([]T, error) {
	var all []T
	tok := ""
	for {
		items, next, err := page(tok)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if tok = next; tok == "" {
			return all, nil
		}
	}
}

// printObjects writes items in the format of -o: a table (default, wide), one
// "kind/name" a line (name), or a document (json, yaml) — the object itself
// for a single get, a {kind, items} list otherwise, as kubectl does.
func printObjects[T proto.Message](c *command, k kind[T], items []T, list bool) error {
	format, arg, _ := strings.Cut(c.output, "=")
	switch format {
	case "jsonpath", "custom-columns":
		return printTemplate(c.out, k, items, list, format, arg)
	}
	switch c.output {
	case "", "wide":
		return k.table(c.out, items, c.output == "wide", time.Now())
	case "name":
		for _, it := range items {
			fmt.Fprintln(c.out, k.name(it))
		}
		return nil
	case "json", "yaml":
		var doc []byte
		var err error
		if list {
			raw := make([]json.RawMessage, len(items))
			for i, it := range items {
				if raw[i], err = protojson.Marshal(it); err != nil {
					return err
				}
			}
			doc, err = json.MarshalIndent(struct {
				Kind  string            `json:"kind"`
				Items []json.RawMessage `json:"items"`
			}{k.list, raw}, "", "    ")
		} else {
			doc, err = jsonOpts.Marshal(items[0])
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
	return fmt.Errorf("-o %q: want wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=SPEC", c.output)
}

// writeTable writes a get table: none when there are no rows, otherwise
// the head (with wideHead when wide) and the rows, tab-separated, aligned.
func writeTable(w io.Writer, none, head, wideHead string, wide bool, rows []string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, none)
		return err
	}
	if wide {
		head += wideHead
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	return tw.Flush()
}

// printExplanation writes what explain node and explain pod answer.
func printExplanation(w io.Writer, what, summary string, details []string) {
	fmt.Fprintf(w, "%s: %s\n", what, summary)
	for _, d := range details {
		fmt.Fprintf(w, "  - %s\n", d)
	}
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// age is the AGE column: how long ago ct was, "<unknown>" when unset.
func age(ct *timestamppb.Timestamp, now time.Time) string {
	if ct == nil {
		return "<unknown>"
	}
	return HumanDuration(now.Sub(ct.AsTime()))
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

func ts(t interface{ AsTime() time.Time }, present bool) string {
	if !present {
		return "<unset>"
	}
	return t.AsTime().Local().Format(time.RFC1123Z)
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
