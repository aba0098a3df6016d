// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
)

// ownerNoun is one of the resource names get, scale and delete take for
// owners and budgets, with kubectl's short names.
type ownerNoun struct {
	kind     appsv1.WorkloadKind // unspecified for budgets
	resource string              // "replicaset.apps", as kubectl prints it
}

var ownerNouns = map[string]ownerNoun{}

func init() {
	for _, n := range []struct {
		names []string
		noun  ownerNoun
	}{
		{[]string{"replicasets", "replicaset", "rs"}, ownerNoun{appsv1.WorkloadKind_WORKLOAD_KIND_REPLICA_SET, "replicaset.apps"}},
		{[]string{"statefulsets", "statefulset", "sts"}, ownerNoun{appsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET, "statefulset.apps"}},
		{[]string{"daemonsets", "daemonset", "ds"}, ownerNoun{appsv1.WorkloadKind_WORKLOAD_KIND_DAEMON_SET, "daemonset.apps"}},
		{[]string{"poddisruptionbudgets", "poddisruptionbudget", "pdb"}, ownerNoun{appsv1.WorkloadKind_WORKLOAD_KIND_UNSPECIFIED, "poddisruptionbudget.policy"}},
	} {
		for _, name := range n.names {
			ownerNouns[name] = n.noun
		}
	}
}

// ownerCommand runs get, scale and delete on owners and budgets.
func (c *command) ownerCommand(ctx context.Context, wl appsv1.WorkloadServiceClient, pdbs policyv1.DisruptionBudgetServiceClient, noun ownerNoun) error {
	verb := c.args[0]
	budget := noun.kind == appsv1.WorkloadKind_WORKLOAD_KIND_UNSPECIFIED
	switch verb {
	case "get":
		switch {
		case len(c.args) == 3 && budget:
			ns, name, err := c.podRef(c.args[2])
			if err != nil {
				return err
			}
			r, err := pdbs.GetPodDisruptionBudget(ctx, &policyv1.GetPodDisruptionBudgetRequest{Namespace: ns, Name: name})
			if err != nil {
				return err
			}
			return printObjects(c, pdbKind, []*policyv1.PodDisruptionBudget{r.GetPodDisruptionBudget()}, false)
		case len(c.args) == 3:
			ns, name, err := c.podRef(c.args[2])
			if err != nil {
				return err
			}
			r, err := wl.GetWorkload(ctx, &appsv1.GetWorkloadRequest{Kind: noun.kind, Namespace: ns, Name: name})
			if err != nil {
				return err
			}
			return c.printWorkloads(noun.kind, []*appsv1.Workload{r.GetWorkload()}, false)
		case len(c.args) != 2:
			return fmt.Errorf("usage: nodepulse get %s [NAME] [-n NS] [-o wide|json|yaml|name]", c.args[1])
		case budget:
			items, err := listAll(func(tok string) ([]*policyv1.PodDisruptionBudget, string, error) {
				r, err := pdbs.ListPodDisruptionBudgets(ctx, &policyv1.ListPodDisruptionBudgetsRequest{Namespace: c.namespace, PageToken: tok})
				return r.GetPodDisruptionBudgets(), r.GetNextPageToken(), err
			})
			if err != nil {
				return err
			}
			return printObjects(c, pdbKind, items, true)
		}
		items, err := listAll(func(tok string) ([]*appsv1.Workload, string, error) {
			r, err := wl.ListWorkloads(ctx, &appsv1.ListWorkloadsRequest{Kind: noun.kind, Namespace: c.namespace, LabelSelector: c.selector, PageToken: tok})
			return r.GetWorkloads(), r.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		return c.printWorkloads(noun.kind, items, true)
	case "scale":
		if len(c.args) != 3 || budget || noun.kind == appsv1.WorkloadKind_WORKLOAD_KIND_DAEMON_SET {
			return errors.New("usage: nodepulse scale rs|sts NAME --replicas=N [-n NS]")
		}
		if c.replicas < 0 {
			return errors.New("scale: --replicas=N is required (N >= 0)")
		}
		ns, name, err := c.podRef(c.args[2])
		if err != nil {
			return err
		}
		if _, err := wl.ScaleWorkload(ctx, &appsv1.ScaleWorkloadRequest{Kind: noun.kind, Namespace: ns, Name: name, Replicas: int32(c.replicas)}); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "%s/%s scaled\n", noun.resource, name)
		return nil
	case "delete":
		if len(c.args) != 3 {
			return errors.New("usage: nodepulse delete rs|sts|ds|pdb NAME [-n NS]")
		}
		ns, name, err := c.podRef(c.args[2])
		if err != nil {
			return err
		}
		if budget {
			_, err = pdbs.DeletePodDisruptionBudget(ctx, &policyv1.DeletePodDisruptionBudgetRequest{Namespace: ns, Name: name})
		} else {
			_, err = wl.DeleteWorkload(ctx, &appsv1.DeleteWorkloadRequest{Kind: noun.kind, Namespace: ns, Name: name})
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(c.out, "%s %q deleted from %s namespace\n", noun.resource, name, ns)
		return nil
	}
	return fmt.Errorf("%s %s: not a command (get, scale, delete)", verb, c.args[1])
}

// printWorkloads prints owners of one kind, unwrapped.
func (c *command) printWorkloads(k appsv1.WorkloadKind, ws []*appsv1.Workload, list bool) error {
	switch k {
	case appsv1.WorkloadKind_WORKLOAD_KIND_REPLICA_SET:
		var items []*appsv1.ReplicaSet
		for _, w := range ws {
			items = append(items, w.GetReplicaSet())
		}
		return printObjects(c, rsKind, items, list)
	case appsv1.WorkloadKind_WORKLOAD_KIND_STATEFUL_SET:
		var items []*appsv1.StatefulSet
		for _, w := range ws {
			items = append(items, w.GetStatefulSet())
		}
		return printObjects(c, stsKind, items, list)
	}
	var items []*appsv1.DaemonSet
	for _, w := range ws {
		items = append(items, w.GetDaemonSet())
	}
	return printObjects(c, dsKind, items, list)
}

func qualified(resource string, md *nodev1.ObjectMeta) string {
	return resource + "/" + md.GetNamespace() + "/" + md.GetName()
}

// selectorString renders a structured selector as kubectl's SELECTOR
// column does ("app=web,tier in (a,b)").
func selectorString(sel *nodev1.LabelSelector) string {
	if sel == nil {
		return "<none>"
	}
	var parts []string
	for k, v := range sel.GetMatchLabels() {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	for _, r := range sel.GetMatchExpressions() {
		switch r.GetOperator() {
		case "In":
			parts = append(parts, r.GetKey()+" in ("+strings.Join(r.GetValues(), ",")+")")
		case "NotIn":
			parts = append(parts, r.GetKey()+" notin ("+strings.Join(r.GetValues(), ",")+")")
		case "Exists":
			parts = append(parts, r.GetKey())
		case "DoesNotExist":
			parts = append(parts, "!"+r.GetKey())
		}
	}
	return orNone(strings.Join(parts, ","))
}

var rsKind = kind[*appsv1.ReplicaSet]{
	name: func(r *appsv1.ReplicaSet) string { return qualified("replicaset.apps", r.GetMetadata()) },
	list: "ReplicaSetList",
	none: "No resources found.", head: "NAMESPACE\tNAME\tDESIRED\tCURRENT\tREADY\tAGE", wideHead: "\tSELECTOR",
	row: func(r *appsv1.ReplicaSet, wide bool, now time.Time) string {
		md, st := r.GetMetadata(), r.GetStatus()
		row := fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%s", md.GetNamespace(), md.GetName(), r.GetSpec().GetReplicas(), st.GetReplicas(), st.GetReadyReplicas(),
			age(md.GetCreationTimestamp(), now))
		if wide {
			row += "\t" + selectorString(r.GetSpec().GetSelector())
		}
		return row
	},
}

var stsKind = kind[*appsv1.StatefulSet]{
	name: func(s *appsv1.StatefulSet) string { return qualified("statefulset.apps", s.GetMetadata()) },
	list: "StatefulSetList",
	none: "No resources found.", head: "NAMESPACE\tNAME\tREADY\tAGE", wideHead: "\tSELECTOR",
	row: func(s *appsv1.StatefulSet, wide bool, now time.Time) string {
		md := s.GetMetadata()
		row := fmt.Sprintf("%s\t%s\t%d/%d\t%s", md.GetNamespace(), md.GetName(), s.GetStatus().GetReadyReplicas(), s.GetSpec().GetReplicas(), age(md.GetCreationTimestamp(), now))
		if wide {
			row += "\t" + selectorString(s.GetSpec().GetSelector())
		}
		return row
	},
}

// dsKind prints DaemonSets with kubectl's columns; NODE SELECTOR is always
// <none>: nodepulse pod templates have no nodeSelector (placement is by
// taints and tolerations only).
var dsKind = kind[*appsv1.DaemonSet]{
	name: func(d *appsv1.DaemonSet) string { return qualified("daemonset.apps", d.GetMetadata()) },
	list: "DaemonSetList",
	none: "No resources found.", head: "NAMESPACE\tNAME\tDESIRED\tCURRENT\tREADY\tUP-TO-DATE\tAVAILABLE\tNODE SELECTOR\tAGE", wideHead: "\tSELECTOR",
	row: func(d *appsv1.DaemonSet, wide bool, now time.Time) string {
		md, st := d.GetMetadata(), d.GetStatus()
		row := fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s", md.GetNamespace(), md.GetName(), st.GetDesiredNumberScheduled(), st.GetCurrentNumberScheduled(),
			st.GetNumberReady(), st.GetUpdatedNumberScheduled(), st.GetNumberAvailable(), "<none>", age(md.GetCreationTimestamp(), now))
		if wide {
			row += "\t" + selectorString(d.GetSpec().GetSelector())
		}
		return row
	},
}

func intOrString(v *policyv1.IntOrString) string {
	switch x := v.GetValue().(type) {
	case *policyv1.IntOrString_IntValue:
		return fmt.Sprint(x.IntValue)
	case *policyv1.IntOrString_StrValue:
		return x.StrValue
	}
	return "N/A"
}

var pdbKind = kind[*policyv1.PodDisruptionBudget]{
	name: func(p *policyv1.PodDisruptionBudget) string {
		return qualified("poddisruptionbudget.policy", p.GetMetadata())
	},
	list: "PodDisruptionBudgetList",
	none: "No resources found.", head: "NAMESPACE\tNAME\tMIN AVAILABLE\tMAX UNAVAILABLE\tALLOWED DISRUPTIONS\tAGE", wideHead: "\tSELECTOR",
	row: func(p *policyv1.PodDisruptionBudget, wide bool, now time.Time) string {
		md := p.GetMetadata()
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s", md.GetNamespace(), md.GetName(), intOrString(p.GetSpec().GetMinAvailable()),
			intOrString(p.GetSpec().GetMaxUnavailable()), p.GetStatus().GetDisruptionsAllowed(), age(md.GetCreationTimestamp(), now))
		if wide {
			row += "\t" + selectorString(p.GetSpec().GetSelector())
		}
		return row
	},
}

// docSeparator splits a multi-document YAML file.
var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// createFromFile is `create -f FILE`: each document (JSON or YAML, several
// YAML documents separated by ---) is created as its kind: field says.
// Fields nodepulse does not model (containers, strategy, ...) are dropped,
// so Kubernetes manifests can be used as they are.
func (c *command) createFromFile(ctx context.Context, pods podv1.PodServiceClient, wl appsv1.WorkloadServiceClient, pdbs policyv1.DisruptionBudgetServiceClient) error {
	var b []byte
	var err error
	if c.file == "-" {
		b, err = io.ReadAll(c.in)
	} else {
		b, err = os.ReadFile(c.file)
	}
	if err != nil {
		return err
	}
	created := 0
	for i, doc := range docSeparator.Split(string(b), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		msg, err := c.createOne(ctx, []byte(doc), pods, wl, pdbs)
		if err != nil {
			return fmt.Errorf("%s (document %d): %w", c.file, i+1, err)
		}
		fmt.Fprintln(c.out, msg)
		created++
	}
	if created == 0 {
		return fmt.Errorf("%s: no objects", c.file)
	}
	return nil
}

var lenient = protojson.UnmarshalOptions{DiscardUnknown: true}

// Manifest converts one Kubernetes-style document (JSON or YAML) into the
// nodepulse object its kind: field names: a Pod, a ReplicaSet (also for a
// Deployment: nodepulse stores a Deployment as the ReplicaSet it would
// own), a StatefulSet, a DaemonSet or a PodDisruptionBudget.
func Manifest(doc []byte) (kind string, obj proto.Message, err error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return "", nil, fmt.Errorf("not JSON or YAML: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil || m == nil {
		return "", nil, errors.New("not an object")
	}
	kind, _ = m["kind"].(string)
	delete(m, "kind")
	delete(m, "apiVersion")
	switch kind {
	case "Pod":
		obj = &podv1.Pod{}
	case "ReplicaSet", "Deployment":
		if spec, ok := m["spec"].(map[string]any); ok {
			// A Deployment's own fields (strategy, revisionHistoryLimit,
			// ...) have no place in a ReplicaSet.
			m["spec"] = map[string]any{"replicas": spec["replicas"], "selector": spec["selector"], "template": spec["template"]}
		}
		obj = &appsv1.ReplicaSet{}
	case "StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "DaemonSet":
		obj = &appsv1.DaemonSet{}
	case "PodDisruptionBudget":
		// Kubernetes writes an IntOrString as a bare number or string.
		if spec, ok := m["spec"].(map[string]any); ok {
			for _, f := range []string{"minAvailable", "maxUnavailable"} {
				switch v := spec[f].(type) {
				case float64:
					spec[f] = map[string]any{"intValue": v}
				case string:
					spec[f] = map[string]any{"strValue": v}
				}
			}
		}
		obj = &policyv1.PodDisruptionBudget{}
	case "":
		return "", nil, errors.New("no kind: field (Pod, ReplicaSet, Deployment, StatefulSet, DaemonSet or PodDisruptionBudget)")
	default:
		return kind, nil, fmt.Errorf("kind %q: nodepulse stores Pod, ReplicaSet, Deployment (as a ReplicaSet), StatefulSet, DaemonSet and PodDisruptionBudget", kind)
	}
	dropNulls(m)
	js, err = json.Marshal(m)
	if err != nil {
		return "", nil, err
	}
	if err := lenient.Unmarshal(js, obj); err != nil {
		return kind, nil, fmt.Errorf("not a %s: %w", kind, err)
	}
	return kind, obj, nil
}

// dropNulls removes null values (creationTimestamp: null in kubectl's
// dry-run output), which protojson refuses for scalars.
func dropNulls(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
				continue
			}
			dropNulls(e)
		}
	case []any:
		for _, e := range x {
			dropNulls(e)
		}
	}
}

func (c *command) createOne(ctx context.Context, doc []byte, pods podv1.PodServiceClient, wl appsv1.WorkloadServiceClient, pdbs policyv1.DisruptionBudgetServiceClient) (string, error) {
	kind, obj, err := Manifest(doc)
	if err != nil {
		return "", err
	}
	// -n fills a namespace the document leaves out; "default" otherwise.
	setNS := func(md *nodev1.ObjectMeta) {
		if md != nil && md.Namespace == "" {
			md.Namespace = c.namespace
			if md.Namespace == "" {
				md.Namespace = "default"
			}
		}
	}
	switch o := obj.(type) {
	case *podv1.Pod:
		setNS(o.GetMetadata())
		r, err := pods.CreatePod(ctx, &podv1.CreatePodRequest{Pod: o})
		if err != nil {
			return "", err
		}
		return "pod/" + r.GetPod().GetMetadata().GetName() + " created", nil
	case *appsv1.ReplicaSet:
		setNS(o.GetMetadata())
		r, err := wl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: &appsv1.Workload{Kind: &appsv1.Workload_ReplicaSet{ReplicaSet: o}}})
		if err != nil {
			return "", err
		}
		name := r.GetWorkload().GetReplicaSet().GetMetadata().GetName()
		if kind == "Deployment" {
			return "deployment.apps/" + name + " created (stored as replicaset.apps/" + name + ": nodepulse has no rollouts)", nil
		}
		return "replicaset.apps/" + name + " created", nil
	case *appsv1.StatefulSet:
		setNS(o.GetMetadata())
		r, err := wl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: &appsv1.Workload{Kind: &appsv1.Workload_StatefulSet{StatefulSet: o}}})
		if err != nil {
			return "", err
		}
		return "statefulset.apps/" + r.GetWorkload().GetStatefulSet().GetMetadata().GetName() + " created", nil
	case *appsv1.DaemonSet:
		setNS(o.GetMetadata())
		r, err := wl.CreateWorkload(ctx, &appsv1.CreateWorkloadRequest{Workload: &appsv1.Workload{Kind: &appsv1.Workload_DaemonSet{DaemonSet: o}}})
		if err != nil {
			return "", err
		}
		return "daemonset.apps/" + r.GetWorkload().GetDaemonSet().GetMetadata().GetName() + " created", nil
	case *policyv1.PodDisruptionBudget:
		setNS(o.GetMetadata())
		r, err := pdbs.CreatePodDisruptionBudget(ctx, &policyv1.CreatePodDisruptionBudgetRequest{PodDisruptionBudget: o})
		if err != nil {
			return "", err
		}
		return "poddisruptionbudget.policy/" + r.GetPodDisruptionBudget().GetMetadata().GetName() + " created", nil
	}
	return "", fmt.Errorf("kind %q not handled", kind)
}
