// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package flagenv gives every command-line flag an environment variable
// equivalent and a --help that lists both.
//
// The variable for flag "etcd.endpoints" of a program whose prefix is
// "NODEPULSE" is NODEPULSE_ETCD_ENDPOINTS: upper case, with '.' and '-' turned
// into '_'. Precedence: command-line flag, then environment, then default.
package flagenv

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// EnvName returns the environment variable that sets flag name.
func EnvName(prefix, name string) string {
	r := strings.NewReplacer(".", "_", "-", "_")
	return prefix + "_" + strings.ToUpper(r.Replace(name))
}

// Parse applies environment variables (looked up with lookup, os.LookupEnv
// when nil) to fs, then parses args, so flags win over the environment. It
// installs a usage function that shows the env name of every flag, headed by
// the given synopsis. A -h/--help request returns flag.ErrHelp after printing
// usage to fs.Output().
func Parse(fs *flag.FlagSet, prefix, synopsis string, args []string, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	fs.Usage = func() { PrintUsage(fs.Output(), fs, prefix, synopsis) }
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := EnvName(prefix, f.Name)
		if v, ok := lookup(env); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("environment %s=%q: %w", env, v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return fs.Parse(args)
}

// PrintUsage writes the synopsis and one entry per flag: name, type,
// environment variable, then the description with its default on the next
// line, grouped by the flag's prefix (the part before the first dot).
func PrintUsage(w io.Writer, fs *flag.FlagSet, prefix, synopsis string) {
	fmt.Fprintln(w, strings.TrimSpace(synopsis))
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Flags (each also settable by the environment variable shown):")
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	sort.SliceStable(flags, func(i, j int) bool { return group(flags[i].Name) < group(flags[j].Name) })
	heads := make([]string, len(flags))
	width := 0
	for i, f := range flags {
		typ, _ := flag.UnquoteUsage(f)
		heads[i] = strings.TrimSpace("--" + f.Name + " " + typ)
		width = max(width, min(len(heads[i]), 44))
	}
	last := "\x00"
	for i, f := range flags {
		if g := group(f.Name); g != last {
			last = g
			if g == "" {
				fmt.Fprintln(w)
			} else {
				fmt.Fprintf(w, "\n[%s]\n", g)
			}
		}
		_, usage := flag.UnquoteUsage(f)
		def := ""
		if f.DefValue != "" && f.DefValue != "[]" {
			def = " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  %-*s  $%s\n", width, heads[i], EnvName(prefix, f.Name))
		fmt.Fprintf(w, "      %s%s\n", usage, def)
	}
}

func group(name string) string {
	if i := strings.IndexByte(name, '.'); i > 0 {
		return name[:i]
	}
	return ""
}

// StringList is a flag.Value holding a comma-separated list.
type StringList []string

// String implements flag.Value.
func (s *StringList) String() string { return strings.Join(*s, ",") }

// Set implements flag.Value; it replaces the list.
func (s *StringList) Set(v string) error {
	*s = nil
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

// StringMap is a flag.Value holding "k=v,k2=v2".
type StringMap map[string]string

// String implements flag.Value.
func (m *StringMap) String() string {
	keys := make([]string, 0, len(*m))
	for k := range *m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + (*m)[k]
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value; it replaces the map.
func (m *StringMap) Set(v string) error {
	out := map[string]string{}
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		k, val, ok := strings.Cut(p, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("%q is not key=value", p)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	*m = out
	return nil
}
