// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/version"
)

// resourceTypes are the TYPE arguments of get, with kubectl's short names.
var resourceTypes = []string{"nodes", "pods", "replicasets", "statefulsets", "daemonsets", "poddisruptionbudgets", "no", "po", "rs", "sts", "ds", "pdb"}

// args checks the number of positional arguments and answers with the
// command's usage line.
func args(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if len(a) < lo || len(a) > hi {
			return fmt.Errorf("usage: %s (examples: '%s --help')", cmd.UseLine(), cmd.CommandPath())
		}
		return nil
	}
}

// verb builds a command whose arguments go to the dispatcher as
// "verb args...".
func (c *command) verb(use, short, example, group string, lo, hi int, flags func(*pflag.FlagSet)) *cobra.Command {
	name, _, _ := strings.Cut(use, " ")
	cmd := &cobra.Command{
		Use: use, Short: short, Example: example, GroupID: group, Args: args(lo, hi),
		RunE: func(cmd *cobra.Command, a []string) error {
			c.args = append([]string{name}, a...)
			return c.run(cmd.Context())
		},
	}
	if flags != nil {
		flags(cmd.Flags())
	}
	return cmd
}

func (c *command) outputFlag(fs *pflag.FlagSet) {
	fs.StringVarP(&c.output, "output", "o", "", "output: wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=HEADER:PATH,...")
}

func (c *command) namespaceFlag(fs *pflag.FlagSet, what string) {
	fs.StringVarP(&c.namespace, "namespace", "n", "", what)
}

func (c *command) selectorFlag(fs *pflag.FlagSet) {
	fs.StringVarP(&c.selector, "selector", "l", "", "label selector: k=v, k!=v, k in (a,b), k notin (a,b), k, !k")
}

func (c *command) graceFlag(fs *pflag.FlagSet, what string) {
	fs.Int64Var(&c.gracePeriod, "grace-period", -1, what)
}

func (c *command) commands() []*cobra.Command {
	get := c.verb("get TYPE [NAME]", "list or show nodes, pods, replicasets, statefulsets, daemonsets or poddisruptionbudgets", `  nodepulse get nodes -o wide
  nodepulse get nodes -l topology.kubernetes.io/zone=eu-1a --condition Ready=Unknown
  nodepulse get nodes -w                                  # the list, then a row per change
  nodepulse get node web-1 -o yaml
  nodepulse get nodes -o jsonpath='{.items[*].metadata.name}'
  nodepulse get nodes -o custom-columns=NAME:.metadata.name,READY:'.status.conditions[?(@.type=="Ready")].status'
  nodepulse get pods -n shop --node web-1 -o wide
  nodepulse get pods -w --node web-1
  nodepulse get rs -n shop
  nodepulse get pdb -o yaml`, "basic", 1, 2, func(fs *pflag.FlagSet) {
		c.outputFlag(fs)
		c.selectorFlag(fs)
		fs.StringVar(&c.condition, "condition", "", "nodes: condition selector, e.g. Ready=Unknown or Ready!=True")
		c.namespaceFlag(fs, "namespace (default: all namespaces for a list, \"default\" for NAME without NS/)")
		fs.BoolVarP(&c.allNamespaces, "all-namespaces", "A", false, "every namespace (the default for lists; for kubectl's muscle memory)")
		fs.StringVar(&c.node, "node", "", "pods: only pods bound to this node")
		fs.BoolVarP(&c.watchFlag, "watch", "w", false, "nodes, pods, rs, sts, ds: after the list, print every change (Ctrl-C ends)")
	})
	get.ValidArgsFunction = c.completeTypeThenName
	describe := c.verb("describe node|pod NAME", "show a node (conditions, taints, lease, explanation, events) or a pod", `  nodepulse describe node web-1
  nodepulse describe pod shop/web-7
  nodepulse describe pod web-7 -n shop`, "basic", 2, 2, func(fs *pflag.FlagSet) {
		c.namespaceFlag(fs, "namespace of a pod NAME without NS/ (default \"default\")")
	})
	describe.ValidArgsFunction = c.completeKindThenName
	explain := c.verb("explain node|pod NAME", "why a node is in its state, or which path ends a pod, and what happens next, when", `  nodepulse explain node web-1
  nodepulse explain pod shop/web-7`, "basic", 2, 2, func(fs *pflag.FlagSet) {
		c.namespaceFlag(fs, "namespace of a pod NAME without NS/ (default \"default\")")
	})
	explain.ValidArgsFunction = c.completeKindThenName
	watch := c.verb("watch nodes", "print every change of the nodes as it happens (EVENT column; -o json: one JSON event a line)", `  nodepulse watch nodes
  nodepulse watch nodes -l role=web -o json | jq .node.metadata.name
  nodepulse watch nodes --resource-version 1234        # resume after a version`, "basic", 1, 1, func(fs *pflag.FlagSet) {
		fs.StringVarP(&c.output, "output", "o", "", "output: json (one watch event a line, nothing else) or name; default a table")
		c.selectorFlag(fs)
		fs.StringVar(&c.rv, "resource-version", "", "resume after this resource version")
	})
	watch.ValidArgs = []string{"nodes"}
	events := c.verb("events [node NAME]", "list events, of every object or of one node", `  nodepulse events
  nodepulse events node web-1`, "basic", 0, 2, nil)

	nodeName := func(cmd *cobra.Command) *cobra.Command { cmd.ValidArgsFunction = c.completeNodeName; return cmd }
	cordon := nodeName(c.verb("cordon NAME", "mark a node unschedulable", "  nodepulse cordon web-1", "ops", 1, 1, nil))
	uncordon := nodeName(c.verb("uncordon NAME", "mark a node schedulable again", "  nodepulse uncordon web-1", "ops", 1, 1, nil))
	taint := nodeName(c.verb("taint NAME key[=value]:Effect | key[:Effect]-", "add or remove a user taint on a node", `  nodepulse taint web-1 dedicated=gpu:NoSchedule
  nodepulse taint web-1 dedicated:NoSchedule-          # remove it
  nodepulse taint web-1 maint=now:NoExecute            # evicts the pods that do not tolerate it`, "ops", 2, 2, nil))
	requestStatus := nodeName(c.verb("request-status NAME", "ask the node's reporter to send its status now", "  nodepulse request-status web-1", "ops", 1, 1, nil))
	drain := nodeName(c.verb("drain NODE", "cordon a node, evict its pods through their disruption budgets and wait until they are gone (kubectl drain)", `  nodepulse drain web-1 --ignore-daemonsets --delete-emptydir-data --timeout 10m
  nodepulse drain web-1 --force --grace-period 0       # bare pods too, at once`, "ops", 1, 1, func(fs *pflag.FlagSet) {
		c.drainFlags.register(fs)
		fs.BoolVar(&c.force, "force", false, "also evict pods that declare no controller")
		c.graceFlag(fs, "seconds each pod is given to terminate (-1: its own)")
	}))
	deleteCmd := c.verb("delete TYPE NAME", "delete a node, a pod, or an owner or budget (rs, sts, ds, pdb)", `  nodepulse delete node web-1
  nodepulse delete pod web-7 -n shop                   # graceful: the node's reporter confirms
  nodepulse delete pod shop/web-7 --force              # removed at once
  nodepulse delete rs web -n shop`, "ops", 2, 2, func(fs *pflag.FlagSet) {
		c.namespaceFlag(fs, "namespace of NAME without NS/ (default \"default\")")
		c.graceFlag(fs, "pod: seconds the pod is given to terminate (-1: its own terminationGracePeriodSeconds; 0 only with --force, otherwise it means 1)")
		fs.BoolVar(&c.force, "force", false, "pod: remove the record at once (grace 0) without waiting for the node's reporter to confirm")
	})
	deleteCmd.ValidArgsFunction = c.completeTypeThenName
	create := c.verb("create [pod] -f FILE", "create the objects of JSON or YAML manifests: Pod, ReplicaSet, Deployment (stored as its ReplicaSet), StatefulSet, DaemonSet, PodDisruptionBudget", `  nodepulse create -f app.yaml -n shop
  kubectl create deployment web --image=nginx --dry-run=client -o yaml | nodepulse create -f -
  nodepulse create pod -f pod.json                      # protojson Pod`, "ops", 0, 1, func(fs *pflag.FlagSet) {
		fs.StringVarP(&c.file, "filename", "f", "", "file with JSON or YAML manifests, --- between documents (- for stdin)")
		c.namespaceFlag(fs, "namespace for documents that name none (default \"default\")")
	})
	create.ValidArgs = []string{"pod"}
	scale := c.verb("scale rs|sts NAME --replicas=N", "set the number of replicas of a ReplicaSet or StatefulSet", "  nodepulse scale rs web -n shop --replicas=5", "ops", 2, 2, func(fs *pflag.FlagSet) {
		fs.Int64Var(&c.replicas, "replicas", -1, "the number of replicas wanted")
		c.namespaceFlag(fs, "namespace of NAME without NS/ (default \"default\")")
	})
	scale.ValidArgs = []string{"rs", "sts", "replicasets", "statefulsets"}
	evict := c.verb("evict pod NAME", "one eviction through the pod's disruption budget", "  nodepulse evict pod web-7 -n shop", "ops", 2, 2, func(fs *pflag.FlagSet) {
		c.namespaceFlag(fs, "namespace of NAME without NS/ (default \"default\")")
		c.graceFlag(fs, "seconds the pod is given to terminate (-1: its own)")
	})
	evict.ValidArgs = []string{"pod"}

	certs := &cobra.Command{Use: "certs", Short: "development certificates", GroupID: "setup"}
	certs.AddCommand(&cobra.Command{
		Use: "init --dir D", Short: "create a development CA and certificates for servers, nodes and operators",
		Example: `  nodepulse certs init --dir .tmp/certs --nodes "$(hostname)" --operators admin
  nodepulse certs init --dir pki --hosts 'monitor.nodepulse.svc,collector.nodepulse.svc'`,
		Args: args(0, 0),
		RunE: func(*cobra.Command, []string) error { return c.certs() },
	})
	fs := certs.Commands()[0].Flags()
	fs.StringVar(&c.dir, "dir", "", "output directory (an existing ca.crt and ca.key there are reused)")
	fs.StringVar(&c.hosts, "hosts", "", "extra server host names and IPs, comma-separated")
	fs.StringVar(&c.nodes, "nodes", "", "node names to issue node certificates for")
	fs.StringVar(&c.operators, "operators", "", "operator names to issue operator certificates for")

	versionCmd := &cobra.Command{Use: "version", Short: "print the version (also --version)", Args: args(0, 0), GroupID: "setup", Example: "  nodepulse version",
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(c.out, version.String())
			return err
		}}
	return []*cobra.Command{get, describe, explain, watch, events, cordon, uncordon, taint, requestStatus, drain, deleteCmd, create, scale, evict,
		certs, versionCmd, c.kubeconfigCommand(), c.configCommand()}
}

// run dispatches c.args ("verb args...") after cobra parsed the flags.
func (c *command) run(ctx context.Context) error {
	verb := c.args[0]
	conn, err := c.g.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	cl := nodev1.NewNodeServiceClient(conn)
	pods := podv1.NewPodServiceClient(conn)
	if verb == "get" && c.watchFlag {
		return c.getWatch(c.g.ctx(ctx), conn)
	}
	rctx, cancel := context.WithTimeout(c.g.ctx(ctx), c.g.timeout)
	defer cancel()
	noun := func() string {
		if len(c.args) > 1 {
			return strings.TrimSuffix(c.args[1], "s")
		}
		return ""
	}
	if verb == "drain" {
		return c.drain(ctx, cl, c.args[1])
	}
	if verb == "evict" {
		if c.args[1] != "pod" && c.args[1] != "po" {
			return errors.New("usage: nodepulse evict pod NAME [-n NS]")
		}
		ns, name, err := c.podRef(c.args[2])
		if err != nil {
			return err
		}
		return c.evictPod(rctx, pods, ns, name)
	}
	if len(c.args) >= 2 && (c.args[1] == "pod" || c.args[1] == "pods" || c.args[1] == "po") {
		return c.podCommand(rctx, pods, cl)
	}
	workloads := appsv1.NewWorkloadServiceClient(conn)
	budgets := policyv1.NewDisruptionBudgetServiceClient(conn)
	if n, ok := ownerNouns[c.argOr(1)]; ok && (verb == "get" || verb == "scale" || verb == "delete") {
		return c.ownerCommand(rctx, workloads, budgets, n)
	}
	if verb == "create" {
		if len(c.args) != 1 || c.file == "" {
			return errors.New("usage: nodepulse create -f FILE [-n NS]")
		}
		return c.createFromFile(rctx, pods, workloads, budgets)
	}
	switch verb {
	case "get":
		switch {
		case len(c.args) == 2 && isNodes(c.args[1]):
			return c.getNodes(rctx, cl)
		case len(c.args) == 3 && isNodes(c.args[1]):
			return c.getNode(rctx, cl, c.args[2])
		}
		return fmt.Errorf("get: unknown resource type %q (one of %s)", c.args[1], strings.Join(resourceTypes, ", "))
	case "describe", "explain":
		if noun() != "node" && c.args[1] != "no" {
			return fmt.Errorf("%s: want node NAME or pod NAME, not %q", verb, c.args[1])
		}
		if verb == "explain" {
			return c.explain(rctx, cl, c.args[2])
		}
		return c.describe(rctx, cl, c.args[2])
	case "watch":
		if !isNodes(c.args[1]) {
			return errors.New("usage: nodepulse watch nodes [-l selector] (get pods -w follows pods)")
		}
		return c.watch(c.g.ctx(ctx), cl)
	case "cordon", "uncordon":
		return c.cordon(rctx, cl, c.args[1], verb == "cordon")
	case "taint":
		return c.taint(rctx, cl, c.args[1], c.args[2])
	case "delete":
		if !isNodes(c.args[1]) {
			return fmt.Errorf("delete: unknown resource type %q (one of %s)", c.args[1], strings.Join(resourceTypes, ", "))
		}
		if _, err := cl.DeleteNode(rctx, &nodev1.DeleteNodeRequest{Name: c.args[2]}); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "node/%s deleted\n", c.args[2])
		return nil
	case "request-status":
		r, err := cl.RequestStatusUpdate(rctx, &nodev1.RequestStatusUpdateRequest{Name: c.args[1]})
		if err != nil {
			return err
		}
		fmt.Fprintf(c.out, "node/%s: status update requested via collector %s (delivered: %v)\n", c.args[1], r.GetCollector(), r.GetDelivered())
		return nil
	case "events":
		name := ""
		if len(c.args) == 3 && noun() == "node" {
			name = c.args[2]
		} else if len(c.args) != 1 {
			return errors.New("usage: nodepulse events [node NAME]")
		}
		return c.events(rctx, cl, name)
	}
	return fmt.Errorf("%s %s: not a command", verb, strings.Join(c.args[1:], " "))
}

func isNodes(s string) bool { return s == "nodes" || s == "node" || s == "no" }

// argOr returns positional argument i, or "".
func (c *command) argOr(i int) string {
	if i < len(c.args) {
		return c.args[i]
	}
	return ""
}
