// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package app

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"sigs.k8s.io/yaml"

	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/services/nodestore/memstore"
)

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// registeredNames builds a monitor and lists every metric family it
// registers (described, whether or not it has samples yet).
func registeredNames(t *testing.T) map[string]bool {
	t.Helper()
	ms := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = ms.Close() })
	cfg := DefaultConfig()
	cfg.Store = ms
	cfg.GRPC.ListenAddress = "127.0.0.1:0"
	cfg.GRPC.TLS.Insecure = true
	cfg.Admin.ListenAddress = ""
	reg := admin.NewRegistry()
	a, err := New(cfg, zap.NewNop(), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = a.Run(ctx) // closes the listeners
	// The process's metrics (/metrics) and the kube_* node series
	// (KubeStatePath), each from its own registry.
	ch := make(chan *prometheus.Desc, 1024)
	go func() {
		reg.Describe(ch)
		a.kubeState.Describe(ch)
		close(ch)
	}()
	names := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
			// Histograms and summaries expose these series too.
			for _, s := range []string{"_bucket", "_count", "_sum"} {
				names[m[1]+s] = true
			}
		}
	}
	return names
}

func TestAlertRulesUseRealMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(b, &rf); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	names := registeredNames(t)
	want := map[string]bool{"NodeNotReady": false, "NodeReporterDown": false, "NodeHeartbeatStale": false, "MonitorNoLeader": false,
		"CollectorDown": false, "ZoneFullDisruption": false, "ZonePartialDisruption": false,
		"CertificateExpiresSoon": false, "CertificateExpiresVerySoon": false}
	metric := regexp.MustCompile(`\b(?:nodepulse|kube)_[a-z_]+\b`)
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" {
				t.Errorf("group %s: rule without alert name or expr", g.Name)
			}
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: needs a severity label and a summary", r.Alert)
			}
			if _, ok := want[r.Alert]; ok {
				want[r.Alert] = true
			}
			used := metric.FindAllString(r.Expr, -1)
			if len(used) == 0 {
				t.Errorf("%s uses no nodepulse metric: %s", r.Alert, r.Expr)
			}
			for _, m := range used {
				// The per-node series under kube-state-metrics' names: registered
				// by the monitor, or (until then) one of the promised names.
				if strings.HasPrefix(m, "kube_") && !names[m] && kubeStateMetrics[m] && !anyKube(names) {
					continue
				}
				if !names[m] {
					t.Errorf("%s uses %s, which the monitor does not register", r.Alert, m)
				}
			}
		}
	}
	for a, found := range want {
		if !found {
			t.Errorf("alert %s missing", a)
		}
	}
}

// kubeStateMetrics are the kube-state-metrics series names the rules may use.
var kubeStateMetrics = map[string]bool{
	"kube_node_status_condition": true, "kube_node_spec_unschedulable": true, "kube_node_spec_taint": true,
	"kube_node_info": true, "kube_lease_renew_time": true, "kube_node_created": true,
	"kube_node_status_capacity": true, "kube_node_status_allocatable": true,
}

// anyKube says whether the monitor registers kube-state-metrics series at
// all; once it does, every kube_ name a rule uses must be registered.
func anyKube(names map[string]bool) bool {
	for n := range names {
		if strings.HasPrefix(n, "kube_") {
			return true
		}
	}
	return false
}
