// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/client-go/util/jsonpath"
)

// The templates of -o jsonpath= and -o custom-columns= run on an object's
// JSON (protojson: the Kubernetes field names, metadata.name,
// status.conditions ...), through client-go's jsonpath, the package kubectl
// uses, so a template written for kubectl reads the same fields here.

// toJSON is the generic JSON value of a message.
func toJSON(m proto.Message) (any, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var v any
	return v, json.Unmarshal(b, &v)
}

// listJSON is the {kind, items} document of items, or the object itself
// for a single get, as -o json prints it.
func listJSON[T proto.Message](k kind[T], items []T, list bool) (any, error) {
	if !list {
		return toJSON(items[0])
	}
	out := make([]any, len(items))
	for i, it := range items {
		v, err := toJSON(it)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return map[string]any{"kind": k.list, "items": out}, nil
}

// printTemplate is -o jsonpath=TEMPLATE (on the object, or on the list
// document) and -o custom-columns=SPEC (a row per object).
func printTemplate[T proto.Message](w io.Writer, k kind[T], items []T, list bool, format, arg string) error {
	if format == "jsonpath" {
		j, err := parseJSONPath(arg)
		if err != nil {
			return err
		}
		doc, err := listJSON(k, items, list)
		if err != nil {
			return err
		}
		return j.Execute(w, doc)
	}
	cols, err := parseColumns(arg)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, cols.header())
	for _, it := range items {
		row, err := cols.row(it)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

func parseJSONPath(tmpl string) (*jsonpath.JSONPath, error) {
	tmpl = strings.Trim(tmpl, "'")
	if tmpl == "" {
		return nil, fmt.Errorf("-o jsonpath: empty template (want e.g. jsonpath='{.items[*].metadata.name}')")
	}
	j := jsonpath.New("output").AllowMissingKeys(true)
	if err := j.Parse(tmpl); err != nil {
		return nil, fmt.Errorf("-o jsonpath=%s: %w", tmpl, err)
	}
	return j, nil
}

// relaxed accepts kubectl's forms of a column's path: name.f, .name.f,
// {name.f} and {.name.f}.
var relaxed = regexp.MustCompile(`^\{?\.?([^{}]+)\}?$`)

type column struct {
	title string
	path  *jsonpath.JSONPath
}

type columns []column

// parseColumns parses "HEADER:PATH,HEADER:PATH" as kubectl does.
func parseColumns(spec string) (columns, error) {
	var cols columns
	for _, part := range strings.Split(spec, ",") {
		title, path, ok := strings.Cut(part, ":")
		m := relaxed.FindStringSubmatch(strings.TrimSpace(path))
		if !ok || title == "" || m == nil {
			return nil, fmt.Errorf("-o custom-columns: %q: want HEADER:PATH, e.g. NAME:.metadata.name", part)
		}
		j := jsonpath.New(title).AllowMissingKeys(true)
		if err := j.Parse("{." + m[1] + "}"); err != nil {
			return nil, fmt.Errorf("-o custom-columns: %s: %w", part, err)
		}
		cols = append(cols, column{title: title, path: j})
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("-o custom-columns: no columns")
	}
	return cols, nil
}

func (cs columns) header() string {
	t := make([]string, len(cs))
	for i, c := range cs {
		t[i] = c.title
	}
	return strings.Join(t, "\t")
}

// row is one object's cells: every value a path finds, comma-separated,
// <none> when it finds nothing.
func (cs columns) row(m proto.Message) (string, error) {
	v, err := toJSON(m)
	if err != nil {
		return "", err
	}
	cells := make([]string, len(cs))
	for i, c := range cs {
		res, err := c.path.FindResults(v)
		if err != nil {
			return "", err
		}
		var vals []string
		for _, r := range res {
			for _, x := range r {
				if x.Kind() == reflect.Interface && x.IsNil() {
					continue
				}
				vals = append(vals, fmt.Sprint(x.Interface()))
			}
		}
		cells[i] = orNone(strings.Join(vals, ","))
	}
	return strings.Join(cells, "\t"), nil
}
