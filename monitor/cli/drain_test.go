// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// TestCLIDrain: `nodepulse drain` prints kubectl's lines: a bare pod
// refuses the drain (exit error, node cordoned, the pending-nodes note);
// with --force it goes and the node is drained; a second drain reports
// "already cordoned" and drained. `evict pod` evicts one pod.
func TestCLIDrain(t *testing.T) {
	addr, ms := startMonitor(t)
	ctx := context.Background()
	put := func(name string) {
		t.Helper()
		if _, err := ms.Apply(ctx, nil, nodestore.Put(nodestore.Pods, "default/"+name, &podv1.Pod{
			Metadata: &nodev1.ObjectMeta{Namespace: "default", Name: name, Uid: name + "-uid"},
			Spec:     &podv1.PodSpec{NodeName: "web-1"},
			Status:   &podv1.PodStatus{Phase: "Running", Conditions: []*podv1.PodCondition{{Type: "Ready", Status: nodemodel.True}}},
		})); err != nil {
			t.Fatal(err)
		}
	}
	put("bare")
	drain := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := Main(ctx, append(append([]string{"drain", "web-1"}, args...), "--server", addr), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	out, errOut, err := drain()
	if err == nil || !strings.Contains(err.Error(), "cannot delete Pods that declare no controller (use --force to override): default/bare") {
		t.Fatalf("drain without --force: %v", err)
	}
	if out != "node/web-1 cordoned\n" || !strings.Contains(errOut, `error: unable to drain node "web-1" due to error: cannot delete Pods that declare no controller`) ||
		!strings.Contains(errOut, "There are pending nodes to be drained:\n web-1\n") {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
	out, errOut, err = drain("--force", "--grace-period", "0")
	if err != nil {
		t.Fatalf("drain --force: %v (%s)", err, errOut)
	}
	if out != "node/web-1 already cordoned\nevicting pod default/bare\npod/bare evicted\nnode/web-1 drained\n" ||
		errOut != "Warning: deleting Pods that declare no controller: default/bare\n" {
		t.Fatalf("stdout %q stderr %q", out, errOut)
	}
	if out, _, err := drain(); err != nil || out != "node/web-1 already cordoned\nnode/web-1 drained\n" {
		t.Fatalf("second drain: %q %v", out, err)
	}
	put("one")
	if out := mustRun(t, addr, "evict", "pod", "one", "-n", "default"); out != "pod/one evicted\n" {
		t.Fatalf("evict: %q", out)
	}
	if _, err := run(t, addr, "evict", "pod", "nope"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("evict missing pod: %v", err)
	}
}
