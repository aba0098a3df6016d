// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package podagent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/validation"
)

// DefaultNamespace is the namespace of a static pod whose manifest names
// none, as the kubelet's file source defaults it.
const DefaultNamespace = "default"

// LoadStatic reads the static pod manifests of dir (the kubelet's
// staticPodPath): every *.json, *.yaml and *.yml file holds one Pod in the
// Kubernetes JSON or YAML form; fields nodepulse does not model
// (containers, volumes ...) are ignored. Hidden files are skipped, as the
// kubelet skips them. An empty dir means no static pods.
func LoadStatic(dir string) ([]*podv1.Pod, error) {
	if dir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("static pods: %w", err)
	}
	var out []*podv1.Pod
	seen := map[string]string{}
	for _, e := range ents {
		name := e.Name()
		ext := strings.ToLower(filepath.Ext(name))
		if e.IsDir() || strings.HasPrefix(name, ".") || !slices.Contains([]string{".json", ".yaml", ".yml"}, ext) {
			continue
		}
		path := filepath.Join(dir, name)
		p, err := ParseManifest(path)
		if err != nil {
			return nil, err
		}
		k := Key(p)
		if prev, dup := seen[k]; dup {
			return nil, fmt.Errorf("static pods: %s and %s both define pod %s", prev, path, k)
		}
		seen[k] = path
		out = append(out, p)
	}
	return out, nil
}

// ParseManifest reads one static pod manifest.
func ParseManifest(path string) (*podv1.Pod, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("static pod %s: %w", path, err)
	}
	js, err := yaml.YAMLToJSON(b) // JSON is YAML: one path for both
	if err != nil {
		return nil, fmt.Errorf("static pod %s: %w", path, err)
	}
	p := &podv1.Pod{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(js, p); err != nil {
		return nil, fmt.Errorf("static pod %s: %w", path, err)
	}
	if p.Metadata == nil {
		p.Metadata = &nodev1.ObjectMeta{}
	}
	if p.Metadata.Namespace == "" {
		p.Metadata.Namespace = DefaultNamespace
	}
	if fe := validation.DNSSubdomain("metadata.name", p.Metadata.GetName()); fe != nil {
		return nil, fmt.Errorf("static pod %s: %w", path, fe)
	}
	if fe := validation.Namespace("metadata.namespace", p.Metadata.GetNamespace()); fe != nil {
		return nil, fmt.Errorf("static pod %s: %w", path, fe)
	}
	if l := validation.Tolerations("spec.tolerations", p.GetSpec().GetTolerations(), validation.DefaultLimits()); len(l) > 0 {
		return nil, fmt.Errorf("static pod %s: %w", path, l)
	}
	// Only what a mirror pod carries is kept.
	p.Metadata = &nodev1.ObjectMeta{Name: p.Metadata.Name, Namespace: p.Metadata.Namespace, Labels: p.Metadata.Labels, Annotations: p.Metadata.Annotations}
	p.Status = nil
	if p.Spec != nil {
		p.Spec.NodeName = ""
	}
	return p, nil
}

// Hash is the static pod's config hash, the value of the mirror annotation:
// a mirror pod with another hash mirrors another version and is replaced.
func Hash(static *podv1.Pod) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(static)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// MirrorOf is the mirror pod of static on node (registered with nodeUID):
// named "<name>-<node>" as the kubelet names static pods, bound to node,
// with the mirror annotation, the node as controller owner (as
// NodeRestriction requires) and the static pods' toleration of every
// NoExecute taint. Status is the caller's.
func MirrorOf(static *podv1.Pod, node, nodeUID string) *podv1.Pod {
	md := static.GetMetadata()
	ann := map[string]string{}
	for k, v := range md.GetAnnotations() {
		ann[k] = v
	}
	ann[validation.MirrorPodAnnotation] = Hash(static)
	var labels map[string]string
	if len(md.GetLabels()) > 0 {
		labels = map[string]string{}
		for k, v := range md.GetLabels() {
			labels[k] = v
		}
	}
	spec := proto.CloneOf(static.GetSpec())
	if spec == nil {
		spec = &podv1.PodSpec{}
	}
	spec.NodeName = node
	if !slices.ContainsFunc(spec.Tolerations, func(t *nodev1.Toleration) bool {
		return t.GetKey() == "" && t.GetOperator() == validation.OpExists && t.GetEffect() == staticToleration().GetEffect() && t.TolerationSeconds == nil
	}) {
		spec.Tolerations = append(spec.Tolerations, staticToleration())
	}
	return &podv1.Pod{
		Metadata: &nodev1.ObjectMeta{
			Name: md.GetName() + "-" + node, Namespace: md.GetNamespace(), Labels: labels, Annotations: ann,
			OwnerReferences: []*nodev1.OwnerReference{{ApiVersion: "v1", Kind: validation.OwnerKindNode, Name: node, Uid: nodeUID, Controller: true}},
		},
		Spec: spec,
	}
}
