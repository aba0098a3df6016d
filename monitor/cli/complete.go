// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// nodeNames lists the monitor's node names starting with prefix, for shell
// completion; nothing when the monitor cannot be reached in a second (a
// completion must never hang the shell).
func (c *command) nodeNames(ctx context.Context, prefix string) []string {
	if err := c.g.applyEnv(); err != nil {
		return nil
	}
	conn, err := c.g.dial()
	if err != nil {
		return nil
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(c.g.ctx(ctx), time.Second)
	defer cancel()
	r, err := nodev1.NewNodeServiceClient(conn).ListNodes(ctx, &nodev1.ListNodesRequest{})
	if err != nil {
		return nil
	}
	var names []string
	for _, n := range r.GetNodes() {
		if name := n.GetMetadata().GetName(); strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	return names
}

func (c *command) completeNodeName(cmd *cobra.Command, a []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if len(a) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return c.nodeNames(cmd.Context(), prefix), cobra.ShellCompDirectiveNoFileComp
}

// completeTypeThenName completes get's and delete's TYPE, then a node's
// name.
func (c *command) completeTypeThenName(cmd *cobra.Command, a []string, prefix string) ([]string, cobra.ShellCompDirective) {
	switch {
	case len(a) == 0:
		return resourceTypes, cobra.ShellCompDirectiveNoFileComp
	case len(a) == 1 && isNodes(a[0]):
		return c.nodeNames(cmd.Context(), prefix), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// completeKindThenName completes describe's and explain's node|pod, then a
// node's name.
func (c *command) completeKindThenName(cmd *cobra.Command, a []string, prefix string) ([]string, cobra.ShellCompDirective) {
	switch {
	case len(a) == 0:
		return []string{"node", "pod"}, cobra.ShellCompDirectiveNoFileComp
	case len(a) == 1 && isNodes(a[0]):
		return c.nodeNames(cmd.Context(), prefix), cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}
