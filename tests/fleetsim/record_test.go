// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

func TestRecorderAppendsAcrossIncarnations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	for inc := int64(1); inc <= 2; inc++ {
		r, err := OpenRecorder(path, inc)
		if err != nil {
			t.Fatal(err)
		}
		r.Status("n-1", 3, 7, &nodev1.NodeStatus{Conditions: []*nodev1.NodeCondition{{Type: "Ready", Status: "True"}}})
		r.Ack("n-1", 3, 7)
		r.Close()
	}
	var nilRec *Recorder
	nilRec.Status("n-1", 1, 1, nil) // recording off: no panic, nothing written
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []RecordLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l RecordLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want 4: %+v", len(lines), lines)
	}
	for i, want := range []struct {
		kind string
		inc  int64
	}{{"status", 1}, {"ack", 1}, {"status", 2}, {"ack", 2}} {
		l := lines[i]
		if l.Kind != want.kind || l.Inc != want.inc || l.Node != "n-1" || l.Gen != 3 || l.Seq != 7 {
			t.Errorf("line %d = %+v, want %s of incarnation %d", i, l, want.kind, want.inc)
		}
		if (l.Status != "") != (want.kind == "status") {
			t.Errorf("line %d: status bytes %q", i, l.Status)
		}
	}
}

func TestClockFaultParses(t *testing.T) {
	for _, line := range []string{"clock +2s", "clock -1500ms for 10s", "at 5s clock 3s"} {
		if _, err := ParseScript(line); err != nil {
			t.Errorf("%q: %v", line, err)
		}
	}
	for _, line := range []string{"clock soon", "clock"} {
		if _, err := ParseScript(line); err == nil {
			t.Errorf("%q parsed", line)
		}
	}
}
