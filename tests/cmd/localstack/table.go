// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	svcrun "github.com/nodepulse/nodepulse/services/run" // this package has a func run
)

// showTable prints the nodes every refresh; on a terminal it redraws in
// place, otherwise it prints only when the table changes.
func showTable(ctx context.Context, out io.Writer, addr string, refresh time.Duration) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	client := nodev1.NewNodeServiceClient(cc)
	tty := isTerminal(out)
	last := ""
	// Draw at once, then every refresh: a refresh that outlasts the
	// interval (a slow monitor) delays the next one instead of queueing.
	draw := func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := client.ListNodes(cctx, &nodev1.ListNodesRequest{})
		cancel()
		var b strings.Builder
		if err != nil {
			fmt.Fprintf(&b, "monitor not answering: %v\n", err)
		} else {
			renderNodes(&b, resp.GetNodes(), time.Now())
		}
		if s := b.String(); tty {
			fmt.Fprintf(out, "\033[H\033[J%s (every %s, Ctrl-C to stop)\n\n%s", time.Now().Format("15:04:05"), refresh, s)
		} else if s != last {
			fmt.Fprintf(out, "%s\n%s\n", time.Now().Format("15:04:05"), s)
			last = s
		}
	}
	draw()
	svcrun.Every(ctx, refresh, draw)
	return nil
}

func renderNodes(w io.Writer, nodes []*nodev1.Node, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tAGE\tVERSION\tINTERNAL-IP\tREASON")
	for _, n := range nodes {
		ready := nodemodel.FindCondition(n.GetStatus().GetConditions(), nodemodel.Ready)
		status := "NotReady"
		switch ready.GetStatus() {
		case nodemodel.True:
			status = "Ready"
		case nodemodel.Unknown:
			status = "Unknown"
		}
		if ready == nil {
			status = "Registering"
		}
		if n.GetSpec().GetUnschedulable() {
			status += ",SchedulingDisabled"
		}
		age := "-"
		if ct := n.GetMetadata().GetCreationTimestamp(); ct != nil {
			age = now.Sub(ct.AsTime()).Round(time.Second).String()
		}
		ip := "-"
		for _, a := range n.GetStatus().GetAddresses() {
			if a.GetType() == nodemodel.AddressInternalIP {
				ip = a.GetAddress()
				break
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.GetMetadata().GetName(), status, age,
			n.GetStatus().GetNodeInfo().GetReporterVersion(), ip, ready.GetReason())
	}
	if len(nodes) == 0 {
		fmt.Fprintln(tw, "(no nodes yet)")
	}
	tw.Flush()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
