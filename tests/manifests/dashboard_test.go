// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package manifests

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// standardMetrics are metric names the dashboard may use that nodepulse's
// own code does not spell out: Prometheus' up, the Go and process
// collectors, go-grpc-middleware's server metrics and etcd's (built from
// namespace + subsystem + name, so not greppable). Listed one by one, not by
// prefix, so a typo still fails.
var standardMetrics = []string{
	"up",
	"go_goroutines", "process_cpu_seconds_total", "process_resident_memory_bytes",
	"grpc_server_handled_total", "grpc_server_started_total", "grpc_server_handling_seconds_bucket",
	"grpc_server_msg_received_total", "grpc_server_msg_sent_total",
	"etcd_mvcc_put_total", "etcd_mvcc_txn_total", "etcd_debugging_mvcc_total_put_size_in_bytes",
	"etcd_disk_wal_fsync_duration_seconds_bucket", "etcd_server_has_leader", "etcd_mvcc_db_total_size_in_bytes",
}

// kubeStateMetrics are the per-node series the monitor exports under
// kube-state-metrics' names and labels (so existing node dashboards and
// alerts work unchanged); the monitor's own tests pin their values.
var kubeStateMetrics = []string{
	"kube_node_status_condition", "kube_node_spec_unschedulable", "kube_node_spec_taint", "kube_node_info",
	"kube_node_status_capacity", "kube_node_status_allocatable", "kube_lease_renew_time", "kube_node_created",
}

var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promNumbers   = regexp.MustCompile(`\b\d[\d.]*(?:[eE][+-]?\d+)?(?:ms|s|m|h|d|w|y)*\b`)
	promGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promNonMetric = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
)

// metricNames returns the metric names a PromQL expression selects: it
// drops strings, label matchers, ranges and grouping clauses, then keeps the
// identifiers that are not function calls or keywords.
func metricNames(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRanges.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	e = promNumbers.ReplaceAllString(e, " ")
	var names []string
	for _, m := range promIdent.FindAllStringSubmatch(e, -1) {
		if m[1] != "" || slices.Contains(promNonMetric, strings.ToLower(m[0])) {
			continue // a function call, or an operator keyword
		}
		if !slices.Contains(names, m[0]) {
			names = append(names, m[0])
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (le) (rate(foo_seconds_bucket{a="b", c=~"x|y"}[5m]))`:                    {"foo_seconds_bucket"},
		`max(a_total) > 0 or up{job="nodepulse-collector"} == 0`:                         {"a_total", "up"},
		`histogram_quantile(0.99, sum by (le, kind) (rate(x_bucket[$__rate_interval])))`: {"x_bucket"},
		`max by (zone, state) (z) == 1`:                                                  {"z"},
		`sum(rate(a[1m])) / ignoring(code) group_left sum(b offset 5m)`:                  {"a", "b"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %v, want %v", expr, got, want)
		}
	}
}

// codeMetricNames collects every quoted "nodepulse_..." string in the
// services' Go code (tests excluded).
func codeMetricNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	quoted := regexp.MustCompile(`"(nodepulse_[a-z0-9_]+)"`)
	names := map[string]bool{}
	for _, dir := range []string{"collector", "monitor", "reporter", "services"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range quoted.FindAllStringSubmatch(string(b), -1) {
				names[m[1]] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(names) == 0 {
		t.Fatal("found no nodepulse_ metric names in the code; is the repository layout different?")
	}
	return names
}

// known says whether name is exported by the code or is a standard metric.
// Histogram series (_bucket, _sum, _count) match their histogram's name.
func known(name string, code map[string]bool) bool {
	if slices.Contains(standardMetrics, name) || slices.Contains(kubeStateMetrics, name) || code[name] {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok && code[base] {
			return true
		}
	}
	return false
}

type grafanaPanel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

// TestDashboard: deploy/grafana/nodepulse.json is valid JSON, every panel
// has an id, a datasource and at least one query, and every metric its
// queries use exists.
func TestDashboard(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "nodepulse.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title      string         `json:"title"`
		UID        string         `json:"uid"`
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("deploy/grafana/nodepulse.json is not valid JSON: %v", err)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Equal(vars, []string{"datasource", "cluster", "namespace", "job"}) {
		t.Errorf("dashboard variables %v, want datasource, cluster, namespace, job", vars)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard lacks a title, uid or panels")
	}
	code := codeMetricNames(t, root)
	ids := map[int]bool{}
	used := map[string]bool{}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d used twice", p.ID)
			}
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Datasource) == 0 || len(p.Targets) == 0 {
				t.Errorf("panel %q has no datasource or no query", p.Title)
			}
			for _, tg := range p.Targets {
				names := metricNames(tg.Expr)
				if len(names) == 0 {
					t.Errorf("panel %q query %s selects no metric: %s", p.Title, tg.RefID, tg.Expr)
				}
				for _, sel := range unfilteredSelectors(tg.Expr) {
					t.Errorf("panel %q query %s: %s lacks the cluster, namespace and job filters (%s)", p.Title, tg.RefID, sel, dashboardFilters)
				}
				for _, n := range names {
					used[n] = true
					if !known(n, code) {
						t.Errorf("panel %q query %s uses %s, which no nodepulse code exports and is not a known standard metric", p.Title, tg.RefID, n)
					}
				}
			}
		}
	}
	walk(d.Panels)
	// The panels the issue asks for are there.
	for _, n := range []string{
		"nodepulse_monitor_nodes", "nodepulse_monitor_heartbeat_age_seconds_bucket",
		"nodepulse_collector_messages_total", "grpc_server_handling_seconds_bucket",
		"etcd_mvcc_put_total", "nodepulse_monitor_taint_queue_depth",
	} {
		if !used[n] {
			t.Errorf("the dashboard does not chart %s", n)
		}
	}
}

// TestDashboardCheckFailsOnUnknownMetric keeps the check honest: a name
// that nothing exports must be reported.
func TestDashboardCheckFailsOnUnknownMetric(t *testing.T) {
	code := codeMetricNames(t, repoRoot(t))
	for _, n := range []string{"nodepulse_monitor_nodez", "grpc_server_handling_second_bucket", "etcd_mvcc_puts_total"} {
		if known(n, code) {
			t.Errorf("%s passes as known", n)
		}
	}
	if !known("nodepulse_collector_etcd_write_duration_seconds_bucket", code) {
		t.Error("a histogram's _bucket series is not recognised")
	}
}

// dashboardFilters must be in every selector of every panel query: on a
// shared Prometheus, process_*, go_* and etcd_* series come from every job.
const dashboardFilters = `cluster=~"$cluster", namespace=~"$namespace", job=~"$job"`

var promSelector = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?`)

// unfilteredSelectors returns the metric selectors of expr that lack
// dashboardFilters.
func unfilteredSelectors(expr string) []string {
	names := metricNames(expr)
	var bad []string
	for _, m := range promSelector.FindAllStringSubmatch(expr, -1) {
		if !slices.Contains(names, m[1]) {
			continue
		}
		if !strings.Contains(m[2], dashboardFilters) {
			bad = append(bad, m[0])
		}
	}
	return bad
}

func TestUnfilteredSelectors(t *testing.T) {
	for expr, want := range map[string]int{
		`sum by (job) (rate(process_cpu_seconds_total[5m]))`:                                                  1,
		`max(etcd_server_has_leader{job=~"$job"})`:                                                            1,
		`max(up{a="b", ` + dashboardFilters + `})`:                                                            0,
		`sum(rate(x_total{` + dashboardFilters + `}[1m])) / sum(rate(y_total{` + dashboardFilters + `}[1m]))`: 0,
		`sum(rate(x_total{` + dashboardFilters + `}[1m])) / sum(rate(y_total[1m]))`:                           1,
	} {
		if got := unfilteredSelectors(expr); len(got) != want {
			t.Errorf("unfilteredSelectors(%q) = %v, want %d", expr, got, want)
		}
	}
}
