// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package etcdstore

import (
	"bufio"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// samples returns the objects of kind k in testdata/sim-<kind>.jsonl: every
// 50th object (and a few under pressure or tainted) of a 2,000-node
// simulator fleet as the collector and the monitor stored them
// (tests/cmd/etcdsize --dump). Kinds without a file get hand-made objects.
func samples(t testing.TB, k nodestore.Kind) []proto.Message {
	t.Helper()
	switch k {
	case nodestore.Pods:
		secs := int64(300)
		return []proto.Message{
			&podv1.Pod{Metadata: &nodev1.ObjectMeta{Name: "api-5c6d7e8f9-abcde", Namespace: "prod", Uid: "0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e",
				Labels: map[string]string{"app": "api"}, CreationTimestamp: timestamppb.New(time.Unix(1790000000, 5))},
				Spec: &podv1.PodSpec{NodeName: "np-0042", Tolerations: []*nodev1.Toleration{
					{Key: "node.kubernetes.io/not-ready", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &secs},
					{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &secs}}},
				Status: &podv1.PodStatus{Phase: "Running", Conditions: []*podv1.PodCondition{{Type: "Ready", Status: "True"}}}},
			&podv1.Pod{Metadata: &nodev1.ObjectMeta{Name: "p", Namespace: "default"}},
		}
	case nodestore.Collectors:
		return []proto.Message{&collectorv1.CollectorInfo{Id: "vm-345ce64a", FeedAddress: "127.0.0.1:59090", Version: "dev"}}
	case nodestore.ReplicaSets, nodestore.StatefulSets, nodestore.DaemonSets:
		// Owners: the same template under each kind, as the API stores them.
		three := int32(3)
		meta := func(name string) *nodev1.ObjectMeta {
			return &nodev1.ObjectMeta{Name: name, Namespace: "prod", Uid: "5e4d3c2b-1a09-4f8e-9d7c-6b5a4f3e2d1c", Generation: 2,
				Labels: map[string]string{"app": name}, CreationTimestamp: timestamppb.New(time.Unix(1790000000, 5))}
		}
		sel := &nodev1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "frontend"},
			MatchExpressions: []*nodev1.LabelSelectorRequirement{{Key: "track", Operator: "NotIn", Values: []string{"canary"}}}}
		tmpl := &podv1.PodTemplateSpec{Metadata: &nodev1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "frontend", "track": "stable"}},
			Spec: &podv1.PodSpec{Volumes: []*podv1.Volume{{Name: "cache", EmptyDir: &podv1.EmptyDirVolumeSource{}}}}}
		switch k {
		case nodestore.ReplicaSets:
			return []proto.Message{&appsv1.ReplicaSet{Metadata: meta("web-7d9f8b6c4"), Spec: &appsv1.ReplicaSetSpec{Replicas: &three, Selector: sel, Template: tmpl},
				Status: &appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, TerminatingReplicas: 1, ObservedGeneration: 2}}}
		case nodestore.StatefulSets:
			return []proto.Message{&appsv1.StatefulSet{Metadata: meta("db"), Spec: &appsv1.StatefulSetSpec{Replicas: &three, Selector: sel, Template: tmpl,
				ServiceName: "db", PodManagementPolicy: "OrderedReady"}, Status: &appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 3, CurrentReplicas: 3, ObservedGeneration: 2}}}
		default:
			return []proto.Message{&appsv1.DaemonSet{Metadata: meta("node-agent"), Spec: &appsv1.DaemonSetSpec{Selector: sel, Template: tmpl},
				Status: &appsv1.DaemonSetStatus{DesiredNumberScheduled: 2000, CurrentNumberScheduled: 1999, NumberReady: 1998, NumberAvailable: 1998, ObservedGeneration: 2}}}
		}
	case nodestore.PodDisruptionBudgets:
		return []proto.Message{&policyv1.PodDisruptionBudget{
			Metadata: &nodev1.ObjectMeta{Name: "web", Namespace: "prod", Uid: "7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d", Generation: 1},
			Spec: &policyv1.PodDisruptionBudgetSpec{MinAvailable: &policyv1.IntOrString{Value: &policyv1.IntOrString_IntValue{IntValue: 2}},
				Selector: &nodev1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Status: &policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3,
				DisruptedPods: map[string]*timestamppb.Timestamp{"web-7d9f8b6c4-x2k9q": timestamppb.New(time.Unix(1790000100, 0))},
				Conditions:    []*policyv1.Condition{{Type: "DisruptionAllowed", Status: "True", Reason: "SufficientPods", ObservedGeneration: 1}}},
		}}
	case nodestore.EventBatches:
		// Batches as the monitor writes them: the recorded events, in order.
		var evs []*nodev1.Event
		for _, m := range samples(t, nodestore.Events) {
			evs = append(evs, m.(*nodev1.Event))
		}
		return []proto.Message{&nodev1.EventBatch{Events: evs}, &nodev1.EventBatch{Events: evs[:10]}, &nodev1.EventBatch{Events: evs[:1]}}
	}
	f, err := os.Open("testdata/sim-" + string(k) + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []proto.Message
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := k.New()
		if err := protojson.Unmarshal(sc.Bytes(), m); err != nil {
			t.Fatalf("%s sample %d: %v", k, len(out), err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil || len(out) == 0 {
		t.Fatalf("%s samples: %d, %v", k, len(out), err)
	}
	return out
}

func TestRoundTripEveryKind(t *testing.T) {
	for _, k := range nodestore.Kinds {
		for i, m := range samples(t, k) {
			v, err := EncodeValue(k, m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeValue(k, v)
			if err != nil {
				t.Fatalf("%s sample %d: %v", k, i, err)
			}
			if !proto.Equal(got, m) {
				t.Fatalf("%s sample %d: round trip changed it:\n%v\n%v", k, i, got, m)
			}
			plain, _ := proto.Marshal(m)
			if len(v) > len(plain) {
				t.Fatalf("%s sample %d: stored %d B, more than plain %d B", k, i, len(v), len(plain))
			}
			// Everything of a kind with a dictionary and more than a few
			// dozen bytes is worth compressing (kinds without one, such as
			// collectors and the owners, compress only when it pays).
			if dictionaryOf(currentDictionaries, k) != "" && len(plain) >= 64 && !IsCompressed(v) {
				t.Errorf("%s sample %d (%d B) stored plain", k, i, len(plain))
			}
		}
	}
}

// Stores written before compression hold plain protobuf; so do writers
// running with --etcd.compress-values=false.
func TestPlainValuesStillRead(t *testing.T) {
	plainCodec := newCodec(false)
	for _, k := range nodestore.Kinds {
		for _, m := range samples(t, k) {
			b, _ := proto.Marshal(m)
			got, err := DecodeValue(k, b)
			if err != nil || !proto.Equal(got, m) {
				t.Fatalf("%s: plain value: %v", k, err)
			}
			s, err := plainCodec.encode(k, m)
			if err != nil || IsCompressed([]byte(s)) {
				t.Fatalf("%s: a non-compressing codec must write plain protobuf", k)
			}
			var again = k.New()
			if err := proto.Unmarshal([]byte(s), again); err != nil || !proto.Equal(again, m) {
				t.Fatalf("%s: plain write is not protobuf: %v", k, err)
			}
		}
	}
	// The empty message is zero bytes, plain.
	if got, err := DecodeValue(nodestore.Nodes, nil); err != nil || !proto.Equal(got, &nodev1.Node{}) {
		t.Fatalf("empty value: %v %v", got, err)
	}
}

// Every released dictionary version stays decodable: values written with
// any of them (by hand here, as an older or newer build would) read back.
func TestEveryDictionaryVersionDecodes(t *testing.T) {
	for v, set := range dictionarySets {
		for _, k := range nodestore.Kinds {
			m := samples(t, k)[0]
			plain, _ := proto.Marshal(m)
			var b bytes.Buffer
			b.Write([]byte{compressedMarker, v})
			w, err := flate.NewWriterDict(&b, flate.DefaultCompression, []byte(set[dictionaryKind(k)]))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = w.Write(plain)
			_ = w.Close()
			got, err := DecodeValue(k, b.Bytes())
			if err != nil || !proto.Equal(got, m) {
				t.Fatalf("version %d, %s: %v", v, k, err)
			}
		}
	}
}

// The dictionaries are part of the storage format: a value compressed with
// one is unreadable without the same bytes. This pins every released set.
// If it fails, the edit must be undone; a new dictionary is a new version
// (dictionaries.go), with its own line added here.
func TestDictionariesPinned(t *testing.T) {
	pinned := map[string]string{
		"1/events": "00896b8c3ffaae3475c7bd8199ebd569200be6d7e08b7e9ce615456b7b2c4ccf",
		"1/health": "ef7eb398ad4d36169e78ee0baa734c6c7a634cb1220bdf1519cd7f5d5421646a",
		"1/leases": "347da9ed5cfef0bcca0ec02f5e45ca7f586c1ab36355549b32db94a60d6065a1",
		"1/nodes":  "0f6b26b776bd6af5d58d35744bcf003e6e73e4b89782c15ee20c1c93eb362a7a",
		"1/pods":   "2cdf9b5fa2c3b13936ef881fc72ed0da789370f7fe385c4e5e9c7c95617c718b",
		"1/status": "fbf0cf87aa1c838b47cca63e0fccb0cf8b981de15ed8416b8682843488bb02c4",
	}
	seen := 0
	for v, set := range dictionarySets {
		for k, d := range set {
			id := fmt.Sprintf("%d/%s", v, k)
			sum := sha256.Sum256([]byte(d))
			got := hex.EncodeToString(sum[:])
			want, ok := pinned[id]
			if !ok {
				t.Errorf("dictionary %s (sha256 %s) is not pinned: add it to this test when it is released", id, got)
				continue
			}
			seen++
			if got != want {
				t.Errorf("dictionary %s changed: sha256 %s, pinned %s. Released dictionaries must never change (stored values depend on them); make a new version instead", id, got, want)
			}
		}
	}
	if seen != len(pinned) {
		t.Errorf("%d pinned dictionaries, %d present: a released dictionary was removed", len(pinned), seen)
	}
	if _, ok := dictionarySets[currentDictionaries]; !ok {
		t.Errorf("currentDictionaries %d is not in dictionarySets", currentDictionaries)
	}
}

func TestDecodeErrors(t *testing.T) {
	m := samples(t, nodestore.Statuses)[0]
	v, _ := EncodeValue(nodestore.Statuses, m)
	if !IsCompressed(v) {
		t.Fatal("status not compressed")
	}
	cases := map[string]struct {
		value []byte
		want  string
	}{
		"marker only":     {[]byte{compressedMarker}, "without a dictionary version"},
		"unknown version": {append([]byte{compressedMarker, 200}, v[2:]...), "unknown dictionary version 200"},
		"truncated":       {v[:len(v)/2], "inflate"},
		"garbage":         {append([]byte{compressedMarker, currentDictionaries}, bytes.Repeat([]byte{0xff}, 40)...), "inflate"},
	}
	for name, c := range cases {
		_, err := DecodeValue(nodestore.Statuses, c.value)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
	if _, err := DecodeValue(nodestore.Statuses, cases["unknown version"].value); !errors.Is(err, errUnknownVersion) {
		t.Errorf("unknown version: %v", err)
	}
	// A bomb: 20 MB of zeros DEFLATEd to ~20 KB must fail, not allocate.
	var b bytes.Buffer
	b.Write([]byte{compressedMarker, currentDictionaries})
	w, _ := flate.NewWriterDict(&b, flate.BestCompression, []byte(dictionaryOf(currentDictionaries, nodestore.Statuses)))
	_, _ = w.Write(make([]byte, 20<<20))
	_ = w.Close()
	if _, err := DecodeValue(nodestore.Statuses, b.Bytes()); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("bomb: %v", err)
	}
}

// The store's decode names the key of a value it cannot read.
func TestStoreDecodeNamesKey(t *testing.T) {
	s := &Store{prefix: "/np/", codec: newCodec(true)}
	_, err := s.decode("/np/status/node-1", []byte{compressedMarker, currentDictionaries, 0xff, 0xff}, 1, 1)
	if err == nil || !strings.Contains(err.Error(), "/np/status/node-1") {
		t.Fatalf("error %v does not name the key", err)
	}
}

// TestCompressionRatio reports what the codec makes of the simulator's
// objects and guards against a regression of the dictionaries' fit.
func TestCompressionRatio(t *testing.T) {
	var plainSum, storedSum int
	for _, k := range []nodestore.Kind{nodestore.Statuses, nodestore.Nodes, nodestore.Events, nodestore.Leases, nodestore.Health} {
		var plain, stored int
		ms := samples(t, k)
		for _, m := range ms {
			b, _ := proto.Marshal(m)
			v, _ := EncodeValue(k, m)
			plain += len(b)
			stored += len(v)
		}
		t.Logf("%-7s %3d objects: plain %6d B (%4d B each), stored %6d B (%4d B each), %.2f", k, len(ms), plain, plain/len(ms), stored, stored/len(ms), float64(stored)/float64(plain))
		plainSum += plain
		storedSum += stored
	}
	r := float64(storedSum) / float64(plainSum)
	t.Logf("total: plain %d B, stored %d B, %.2f", plainSum, storedSum, r)
	if r > 0.40 {
		t.Errorf("values compress to %.2f of their size, expected at most 0.40", r)
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, k := range []nodestore.Kind{nodestore.Statuses, nodestore.Nodes, nodestore.Events, nodestore.Leases, nodestore.Health} {
		ms := samples(b, k)
		for _, c := range []struct {
			name  string
			codec *codec
		}{{"plain", newCodec(false)}, {"compressed", newCodec(true)}} {
			b.Run(string(k)+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				n := 0
				for i := 0; b.Loop(); i++ {
					s, err := c.codec.encode(k, ms[i%len(ms)])
					if err != nil {
						b.Fatal(err)
					}
					n += len(s)
				}
				b.ReportMetric(float64(n)/float64(b.N), "B/value")
			})
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, k := range []nodestore.Kind{nodestore.Statuses, nodestore.Nodes, nodestore.Events, nodestore.Leases, nodestore.Health} {
		ms := samples(b, k)
		for _, c := range []struct {
			name  string
			codec *codec
		}{{"plain", newCodec(false)}, {"compressed", newCodec(true)}} {
			vals := make([][]byte, len(ms))
			for i, m := range ms {
				s, _ := c.codec.encode(k, m)
				vals[i] = []byte(s)
			}
			b.Run(string(k)+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if err := c.codec.decode(k, vals[i%len(vals)], k.New()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// --etcd.compress-values defaults to true (PlainValues false), and false
// sets PlainValues; a zero Config (tests, Wrap) compresses.
func TestCompressValuesFlag(t *testing.T) {
	for args, want := range map[string]bool{"": false, "--etcd.compress-values=false": true, "--etcd.compress-values": false, "--etcd.compress-values=true": false} {
		var c Config
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		c.RegisterFlags(fs)
		var argv []string
		if args != "" {
			argv = []string{args}
		}
		if err := fs.Parse(argv); err != nil {
			t.Fatal(err)
		}
		if c.PlainValues != want {
			t.Errorf("%q: PlainValues %v, want %v", args, c.PlainValues, want)
		}
	}
	if s := Wrap(nil, Config{}, nil); !s.codec.write {
		t.Error("a zero Config must compress")
	}
}
