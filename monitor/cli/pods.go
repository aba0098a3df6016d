// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
)

// podCommand runs the pod verbs: get, describe, explain, create, delete.
func (c *command) podCommand(ctx context.Context, cl podv1.PodServiceClient, nodes nodev1.NodeServiceClient) error {
	verb := c.args[0]
	switch verb {
	case "get":
		if len(c.args) == 3 {
			ns, name, err := c.podRef(c.args[2])
			if err != nil {
				return err
			}
			r, err := cl.GetPod(ctx, &podv1.GetPodRequest{Namespace: ns, Name: name})
			if err != nil {
				return err
			}
			return printObjects(c, podKind, []*podv1.Pod{r.GetPod()}, false)
		}
		if len(c.args) != 2 {
			return errors.New("usage: nodepulse get pods [-n NS] [--node NODE] [-l selector] | get pod NS/NAME")
		}
		pods, err := listAll(func(tok string) ([]*podv1.Pod, string, error) {
			r, err := cl.ListPods(ctx, &podv1.ListPodsRequest{Namespace: c.namespace, NodeName: c.node, LabelSelector: c.selector, PageToken: tok})
			return r.GetPods(), r.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		return printObjects(c, podKind, pods, true)
	case "describe", "explain", "delete":
		if len(c.args) != 3 {
			if verb == "delete" {
				return errors.New("usage: nodepulse delete pod NAME [-n NS] [--grace-period=N] [--force]")
			}
			return fmt.Errorf("usage: nodepulse %s pod NS/NAME", verb)
		}
		ns, name, err := c.podRef(c.args[2])
		if err != nil {
			return err
		}
		switch verb {
		case "delete":
			return c.deletePod(ctx, cl, ns, name)
		case "explain":
			r, err := cl.ExplainPod(ctx, &podv1.ExplainPodRequest{Namespace: ns, Name: name})
			if err != nil {
				return err
			}
			printExplanation(c.out, ns+"/"+name, r.GetSummary(), r.GetDetails())
			return nil
		}
		r, err := cl.GetPod(ctx, &podv1.GetPodRequest{Namespace: ns, Name: name})
		if err != nil {
			return err
		}
		ex, xerr := cl.ExplainPod(ctx, &podv1.ExplainPodRequest{Namespace: ns, Name: name})
		evs, eerr := nodes.ListEvents(ctx, &nodev1.ListEventsRequest{Kind: "Pod", Namespace: ns, Name: name, Limit: 20})
		DescribePod(c.out, time.Now(), r.GetPod(), ex, evs.GetEvents())
		return errors.Join(xerr, eerr)
	case "create":
		if len(c.args) != 2 || c.file == "" {
			return errors.New("usage: nodepulse create pod -f pod.json")
		}
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
		p := &podv1.Pod{}
		if err := protojson.Unmarshal(b, p); err != nil {
			return fmt.Errorf("%s: not a protojson Pod: %w", c.file, err)
		}
		if c.namespace != "" && p.GetMetadata().GetNamespace() == "" && p.GetMetadata() != nil {
			p.Metadata.Namespace = c.namespace
		}
		r, err := cl.CreatePod(ctx, &podv1.CreatePodRequest{Pod: p})
		if err != nil {
			return err
		}
		fmt.Fprintf(c.out, "pod/%s created (namespace %s, uid %s)\n", r.GetPod().GetMetadata().GetName(), r.GetPod().GetMetadata().GetNamespace(), r.GetPod().GetMetadata().GetUid())
		return nil
	}
	return fmt.Errorf("%s: not a pod command (get, describe, explain, create, delete)", verb)
}

// ForceWarning is kubectl's warning for a forced delete, on stderr.
const ForceWarning = "Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. The resource may continue to run on the cluster indefinitely."

// deleteGrace applies kubectl delete's rules to --grace-period and --force
// (pkg/cmd/delete): --force alone is 0, --force with a grace above 0 is an
// error, --grace-period=0 without --force becomes 1 (a plain delete never
// skips the node's confirmation by accident); -1 leaves the pod's own.
func deleteGrace(grace int64, force bool) (g *int64, forced bool, err error) {
	switch {
	case force && grace > 0:
		return nil, false, errors.New("--force and --grace-period greater than 0 cannot be specified together")
	case force:
		zero := int64(0)
		return &zero, true, nil
	case grace == 0:
		one := int64(1)
		return &one, false, nil
	case grace < 0:
		return nil, false, nil
	}
	return &grace, false, nil
}

// deletePod is `delete pod`, worded as kubectl v1.34+.
func (c *command) deletePod(ctx context.Context, cl podv1.PodServiceClient, ns, name string) error {
	grace, forced, err := deleteGrace(c.gracePeriod, c.force)
	if err != nil {
		return err
	}
	if forced {
		fmt.Fprintln(c.errOut, ForceWarning)
	}
	if _, err := cl.DeletePod(ctx, &podv1.DeletePodRequest{Namespace: ns, Name: name, GracePeriodSeconds: grace}); err != nil {
		return err
	}
	if forced {
		fmt.Fprintf(c.out, "pod %q force deleted from %s namespace\n", name, ns)
	} else {
		fmt.Fprintf(c.out, "pod %q deleted from %s namespace\n", name, ns)
	}
	return nil
}

// podRef parses "NS/NAME", or "NAME" in -n (default "default").
func (c *command) podRef(s string) (string, string, error) {
	if ns, name, ok := strings.Cut(s, "/"); ok {
		if ns == "" || name == "" {
			return "", "", fmt.Errorf("pod %q: want NS/NAME", s)
		}
		return ns, name, nil
	}
	ns := c.namespace
	if ns == "" {
		ns = "default"
	}
	return ns, s, nil
}

// podKind is how get prints pods.
var podKind = kind[*podv1.Pod]{
	name: func(p *podv1.Pod) string {
		return "pod/" + p.GetMetadata().GetNamespace() + "/" + p.GetMetadata().GetName()
	},
	list:     "PodList",
	none:     "No pods found.",
	head:     "NAMESPACE\tNAME\tREADY\tSTATUS\tNODE\tAGE",
	wideHead: "\tOWNER\tTOLERATIONS",
	row:      podRow,
}

// podReady renders the READY column: the Ready condition's status.
func podReady(p *podv1.Pod) string {
	for _, c := range p.GetStatus().GetConditions() {
		if c.GetType() == "Ready" {
			return c.GetStatus()
		}
	}
	return "<none>"
}

func ownerOf(p *podv1.Pod) string {
	refs := p.GetMetadata().GetOwnerReferences()
	for _, r := range refs {
		if r.GetController() {
			return r.GetKind() + "/" + r.GetName()
		}
	}
	if len(refs) > 0 {
		return refs[0].GetKind() + "/" + refs[0].GetName()
	}
	return "<none>"
}

// PodStatus is the STATUS cell as kubectl prints it (the API server's
// printPod, without container states, which nodepulse pods do not carry):
// the phase, or status.reason when set; then Unknown for a terminating pod
// with reason NodeLost, Terminating for any other terminating pod not in a
// terminal phase. A pod on an unreachable node keeps printing Running: the
// lifecycle controller sets only its Ready condition.
func PodStatus(p *podv1.Pod) string {
	st := p.GetStatus()
	s := st.GetPhase()
	if st.GetReason() != "" {
		s = st.GetReason()
	}
	if p.GetMetadata().GetDeletionTimestamp() != nil {
		switch {
		case st.GetReason() == "NodeLost":
			s = "Unknown"
		case st.GetPhase() != "Succeeded" && st.GetPhase() != "Failed":
			s = "Terminating"
		}
	}
	return orNone(s)
}

func podRow(p *podv1.Pod, wide bool, now time.Time) string {
	md := p.GetMetadata()
	row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", md.GetNamespace(), md.GetName(), podReady(p), PodStatus(p), orNone(p.GetSpec().GetNodeName()), age(md.GetCreationTimestamp(), now))
	if wide {
		row += fmt.Sprintf("\t%s\t%d", ownerOf(p), len(p.GetSpec().GetTolerations()))
	}
	return row
}

// DescribePod writes the kubectl-describe-like view of a pod.
func DescribePod(w io.Writer, now time.Time, p *podv1.Pod, ex *podv1.ExplainPodResponse, evs []*nodev1.Event) {
	md := p.GetMetadata()
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", md.GetName())
	fmt.Fprintf(tw, "Namespace:\t%s\n", md.GetNamespace())
	fmt.Fprintf(tw, "UID:\t%s\n", md.GetUid())
	fmt.Fprintf(tw, "Node:\t%s\n", orNone(p.GetSpec().GetNodeName()))
	fmt.Fprintf(tw, "Controlled By:\t%s\n", ownerOf(p))
	fmt.Fprintf(tw, "CreationTimestamp:\t%s\n", ts(md.GetCreationTimestamp(), md.GetCreationTimestamp() != nil))
	status := PodStatus(p)
	if dt := md.GetDeletionTimestamp(); dt != nil {
		// kubectl describe: how long the deletion has been pending.
		status = fmt.Sprintf("%s (lasts %s)", status, age(dt, now))
		fmt.Fprintf(tw, "Deletion Timestamp:\t%s\n", ts(dt, true))
		fmt.Fprintf(tw, "Deletion Grace Period:\t%ds\n", md.GetDeletionGracePeriodSeconds())
	}
	fmt.Fprintf(tw, "Status:\t%s\n", status)
	if st := p.GetStatus(); st.GetReason() != "" || st.GetMessage() != "" {
		fmt.Fprintf(tw, "Reason:\t%s\n", orNone(st.GetReason()))
		fmt.Fprintf(tw, "Message:\t%s\n", orNone(st.GetMessage()))
	}
	if g := p.GetSpec().TerminationGracePeriodSeconds; g != nil {
		fmt.Fprintf(tw, "Termination Grace Period:\t%ds\n", *g)
	}
	fmt.Fprintf(tw, "HostNetwork:\t%v\n", p.GetSpec().GetHostNetwork())
	var labels []string
	for k, v := range md.GetLabels() {
		labels = append(labels, k+"="+v)
	}
	fmt.Fprintf(tw, "Labels:\t%s\n", orNone(strings.Join(sorted(labels), ",")))
	tw.Flush()
	fmt.Fprintln(w, "Conditions:")
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  Type\tStatus\tLastTransitionTime\tReason\tMessage")
	for _, c := range p.GetStatus().GetConditions() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.GetType(), c.GetStatus(), ts(c.GetLastTransitionTime(), c.GetLastTransitionTime() != nil), c.GetReason(), c.GetMessage())
	}
	tw.Flush()
	fmt.Fprintln(w, "Tolerations:")
	for _, t := range p.GetSpec().GetTolerations() {
		op := t.GetOperator()
		if op == "" {
			op = "Equal"
		}
		s := t.GetKey()
		if s == "" {
			s = "<all keys>"
		}
		if op == "Equal" || op == "Lt" || op == "Gt" {
			s += " " + op + " " + t.GetValue()
		} else {
			s += " op=" + op
		}
		if t.GetEffect() != "" {
			s += ":" + t.GetEffect()
		}
		if t.TolerationSeconds != nil {
			s += fmt.Sprintf(" for %ds", t.GetTolerationSeconds())
		}
		fmt.Fprintf(w, "  %s\n", s)
	}
	if ex != nil {
		fmt.Fprintln(w, "Explanation:")
		fmt.Fprintf(w, "  %s\n", ex.GetSummary())
	}
	fmt.Fprintln(w, "Events:")
	printEvents(w, evs, now, "  ")
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
