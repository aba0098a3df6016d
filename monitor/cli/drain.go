// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
)

// drainFlags are the flags of `nodepulse drain` besides --force,
// --grace-period and --timeout, which other commands have too.
type drainFlags struct {
	ignoreDaemonSets, deleteEmptyDirData, disableEviction bool
	podSelector                                           string
}

func (d *drainFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&d.ignoreDaemonSets, "ignore-daemonsets", false, "skip DaemonSet-managed pods instead of refusing the drain")
	fs.BoolVar(&d.deleteEmptyDirData, "delete-emptydir-data", false, "evict pods with emptyDir volumes (their data is lost) instead of refusing the drain")
	fs.BoolVar(&d.disableEviction, "disable-eviction", false, "delete pods directly, bypassing their disruption budgets")
	fs.StringVar(&d.podSelector, "pod-selector", "", "only the pods this label selector matches")
}

// drain runs `nodepulse drain NODE` as kubectl drain prints it: progress on
// stdout, warnings and refusals on stderr, exit status 1 when the node is
// not drained (it stays cordoned). --timeout is the drain's global timeout
// here (kubectl's), unlimited unless given; --grace-period -1 means the
// pods' own.
func (c *command) drain(ctx context.Context, cl nodev1.NodeServiceClient, node string) error {
	req := &nodev1.DrainNodeRequest{
		Name: node, IgnoreDaemonsets: c.drainFlags.ignoreDaemonSets, DeleteEmptydirData: c.drainFlags.deleteEmptyDirData,
		Force: c.force, PodSelector: c.drainFlags.podSelector, DisableEviction: c.drainFlags.disableEviction,
	}
	if c.gracePeriod >= 0 {
		g := c.gracePeriod
		req.GracePeriodSeconds = &g
	}
	if c.g.flags.Lookup("timeout").Changed {
		req.Timeout = durationpb.New(c.g.timeout)
	}
	stream, err := cl.DrainNode(c.g.ctx(ctx), req)
	if err != nil {
		return err
	}
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("drain of node %q ended without a result", node)
		}
		if err != nil {
			return fmt.Errorf("unable to drain node %q: %s", node, status.Convert(err).Message())
		}
		if done, last := printDrain(c.out, c.errOut, r); last {
			if !done.GetDrained() {
				fmt.Fprintf(c.errOut, "There are pending nodes to be drained:\n %s\n", node)
				return errors.New(drainCause(done.GetMessage(), node))
			}
			return nil
		}
	}
}

// drainCause is the error inside kubectl's "unable to drain" line.
func drainCause(msg, node string) string {
	msg = strings.TrimPrefix(msg, fmt.Sprintf("error: unable to drain node %q due to error: ", node))
	return strings.TrimSuffix(msg, ", continuing command...")
}

// printDrain prints one stream message as kubectl does; last is true for
// the final one.
func printDrain(out, errOut io.Writer, r *nodev1.DrainNodeResponse) (*nodev1.DrainNodeResponse_Done, bool) {
	switch e := r.GetEvent().(type) {
	case *nodev1.DrainNodeResponse_Cordoned:
		fmt.Fprintf(out, "node/%s cordoned\n", e.Cordoned)
	case *nodev1.DrainNodeResponse_AlreadyCordoned:
		fmt.Fprintf(out, "node/%s already cordoned\n", e.AlreadyCordoned)
	case *nodev1.DrainNodeResponse_Warning_:
		fmt.Fprintln(errOut, e.Warning.GetMessage())
	case *nodev1.DrainNodeResponse_Pod:
		switch e.Pod.GetAction() {
		case "retrying", "refused":
			fmt.Fprintln(errOut, e.Pod.GetMessage())
		default:
			fmt.Fprintln(out, e.Pod.GetMessage())
		}
	case *nodev1.DrainNodeResponse_Done_:
		if e.Done.GetDrained() {
			fmt.Fprintln(out, e.Done.GetMessage())
		} else {
			fmt.Fprintln(errOut, e.Done.GetMessage())
		}
		return e.Done, true
	}
	return nil, false
}

// evictPod runs `nodepulse evict pod NAME [-n NS]`: one eviction through
// the pod's disruption budget, no retries (a refusal is the error).
func (c *command) evictPod(ctx context.Context, cl podv1.PodServiceClient, ns, name string) error {
	req := &podv1.EvictPodRequest{Namespace: ns, Name: name}
	if c.gracePeriod >= 0 {
		g := c.gracePeriod
		req.GracePeriodSeconds = &g
	}
	if _, err := cl.EvictPod(ctx, req); err != nil {
		return errors.New(status.Convert(err).Message())
	}
	fmt.Fprintf(c.out, "pod/%s evicted\n", name)
	return nil
}
