// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package cli is the nodepulse command line: kubectl-like views of the
// monitor's NodeService (get, describe, watch, explain) and the operator's
// changes (cordon, uncordon, taint, delete, request-status), plus
// development certificates (certs init). It talks to the monitor only
// through the generated gRPC clients and shares nothing with the monitor's
// internals, so it can be read (and built) alone.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	appsv1 "github.com/nodepulse/nodepulse/gen/nodepulse/apps/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	policyv1 "github.com/nodepulse/nodepulse/gen/nodepulse/policy/v1"
	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/services/flagenv"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/services/identity/devca"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
	"github.com/nodepulse/nodepulse/services/version"
)

// EnvPrefix of the CLI's environment variables (NODEPULSE_SERVER ...).
const EnvPrefix = "NODEPULSE"

const usage = `nodepulse: look at and operate the nodes a nodepulse monitor serves.

Usage: nodepulse [flags] <command> [args]

Commands:
  get nodes [-l selector] [--condition Ready=Unknown] [-o wide|json|yaml|name]
  get node NAME [-o wide|json|yaml|name]
  describe node NAME            conditions, taints, addresses, capacity, lease, explanation, events
  watch nodes [-l selector] [--resource-version RV]
  explain node NAME             why the node is in its state, and what happens next, when
  cordon NAME | uncordon NAME
  taint NAME key[=value]:Effect taint NAME key[:Effect]-   (add / remove a user taint)
  delete node NAME
  request-status NAME           ask the node's reporter to send its status now
  events [node NAME]
  get pods [-n NS] [--node NODE] [-l selector] [-o wide|json|yaml|name]
  describe pod NS/NAME          tolerations, conditions, explanation, events
  explain pod NS/NAME           which path ends the pod (eviction, pod GC, its reporter) and when
  create pod -f pod.json        (protojson Pod; admission adds default tolerations)
  create -f FILE [-n NS]        JSON or YAML manifests (--- between documents), by kind:
                                Pod, ReplicaSet, Deployment (stored as its ReplicaSet),
                                StatefulSet, DaemonSet, PodDisruptionBudget
  get rs|sts|ds|pdb [NAME] [-n NS] [-l selector] [-o wide|json|yaml|name]
                                (also replicasets, statefulsets, daemonsets, poddisruptionbudgets)
  scale rs|sts NAME --replicas=N [-n NS]
  delete rs|sts|ds|pdb NAME [-n NS]
  delete pod NAME [-n NS] [--grace-period=N] [--force]
                                graceful unless --force (grace 0: removed at once)
  certs init --dir D [--hosts h1,h2] [--nodes n1,n2] [--operators alice]
  version                       print the version (also --version)

Connection flags may be given before or after the command. TLS is used when
any --tls-* flag is set; otherwise the connection is plaintext (development).`

// globals are the connection flags every command takes.
type globals struct {
	server  string
	token   string
	tls     tlsconfig.Config
	timeout time.Duration
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.server, "server", fmt.Sprintf("127.0.0.1:%d", admin.MonitorGRPCPort), "monitor gRPC address (host:port, or a comma-separated list)")
	fs.StringVar(&g.token, "token", "", "bearer token for changes on a plaintext monitor (its --auth.operator-token)")
	fs.StringVar(&g.tls.CertFile, "tls-cert", "", "client certificate (operator-<name>.crt from certs init)")
	fs.StringVar(&g.tls.KeyFile, "tls-key", "", "key of --tls-cert")
	fs.StringVar(&g.tls.CAFile, "tls-ca", "", "CA that verifies the monitor (ca.crt)")
	fs.StringVar(&g.tls.ServerName, "tls-server-name", "", "name to verify in the monitor's certificate (default: host of --server)")
	fs.DurationVar(&g.timeout, "timeout", 10*time.Second, "timeout of each request")
}

func (g *globals) dial() (*grpc.ClientConn, error) {
	cfg := grpcclient.Config{Addresses: g.server, TLS: g.tls, KeepaliveTime: 30 * time.Second, KeepaliveTimeout: 10 * time.Second}
	cfg.TLS.Insecure = g.tls.CertFile == "" && g.tls.KeyFile == "" && g.tls.CAFile == ""
	return grpcclient.Dial(cfg, nil)
}

func (g *globals) ctx(parent context.Context) context.Context {
	if g.token != "" {
		parent = metadata.AppendToOutgoingContext(parent, "authorization", "Bearer "+g.token)
	}
	return parent
}

// command is one parsed invocation.
type command struct {
	g      globals
	out    io.Writer
	errOut io.Writer
	args   []string
	fs     *flag.FlagSet
	// per-command flags
	selector, condition, output, rv string
	dir, hosts, nodes, operators    string
	namespace, node, file           string
	// delete pod: --grace-period (-1: the pod's own) and --force
	gracePeriod int64
	force       bool
	// scale: --replicas (-1: not given)
	replicas int64
}

// Main runs the CLI with args (without the program name).
func Main(ctx context.Context, args []string, out, errOut io.Writer) error {
	c := &command{out: out, errOut: errOut}
	fs := flag.NewFlagSet("nodepulse", flag.ContinueOnError)
	fs.SetOutput(errOut)
	c.fs = fs
	c.g.register(fs)
	// One entry a flag; a second name is an alias ("same as -l").
	for _, f := range []struct {
		p     *string
		names []string
		usage string
	}{
		{&c.selector, []string{"l", "selector"}, "label selector: k=v, k!=v, k in (a,b), k notin (a,b), k, !k"},
		{&c.condition, []string{"condition"}, "condition selector, e.g. Ready=Unknown or Ready!=True"},
		{&c.output, []string{"o"}, "output: wide, json, yaml or name"},
		{&c.rv, []string{"resource-version"}, "watch: resume after this resource version"},
		{&c.namespace, []string{"n", "namespace"}, "pods: namespace (default: all namespaces for get, \"default\" for NAME without NS/)"},
		{&c.node, []string{"node"}, "get pods: only pods bound to this node"},
		{&c.file, []string{"f"}, "create: file with JSON or YAML manifests (- for stdin)"},
		{&c.dir, []string{"dir"}, "certs init: output directory"},
		{&c.hosts, []string{"hosts"}, "certs init: extra server host names and IPs, comma-separated"},
		{&c.nodes, []string{"nodes"}, "certs init: node names to issue node certificates for"},
		{&c.operators, []string{"operators"}, "certs init: operator names to issue operator certificates for"},
	} {
		fs.StringVar(f.p, f.names[0], "", f.usage)
		for _, alias := range f.names[1:] {
			fs.StringVar(f.p, alias, "", "same as -"+f.names[0])
		}
	}
	fs.Int64Var(&c.gracePeriod, "grace-period", -1, "delete pod: seconds the pod is given to terminate (-1: its own terminationGracePeriodSeconds; 0 only with --force, otherwise it means 1)")
	fs.BoolVar(&c.force, "force", false, "delete pod: remove the record at once (grace 0) without waiting for the node's reporter to confirm")
	fs.Int64Var(&c.replicas, "replicas", -1, "scale: the number of replicas wanted")
	showVersion := fs.Bool("version", false, "print the version and exit")
	// Flags may follow the command and its arguments (kubectl style).
	var pos []string
	rest := args
	lookup := func(k string) (string, bool) { return os.LookupEnv(k) }
	first := true
	for {
		var err error
		if first {
			err = flagenv.Parse(fs, EnvPrefix, usage, rest, lookup)
			first = false
		} else {
			err = fs.Parse(rest)
		}
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		if err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	c.args = pos
	if *showVersion || (len(pos) == 1 && pos[0] == "version") {
		_, err := fmt.Fprintln(c.out, version.String())
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return errors.New("no command given")
	}
	return c.run(ctx)
}

// argOr returns positional argument i, or "".
func (c *command) argOr(i int) string {
	if i < len(c.args) {
		return c.args[i]
	}
	return ""
}

func (c *command) need(n int, form string) error {
	if len(c.args) != n {
		return fmt.Errorf("usage: nodepulse %s", form)
	}
	return nil
}

func (c *command) run(ctx context.Context) error {
	verb := c.args[0]
	if verb == "certs" {
		if err := c.need(2, "certs init --dir D [--hosts ...] [--nodes ...] [--operators ...]"); err != nil || c.args[1] != "init" {
			return errors.New("usage: nodepulse certs init --dir D [--hosts h1,h2] [--nodes n1,n2] [--operators alice]")
		}
		return c.certs()
	}
	conn, err := c.g.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	cl := nodev1.NewNodeServiceClient(conn)
	pods := podv1.NewPodServiceClient(conn)
	rctx, cancel := context.WithTimeout(c.g.ctx(ctx), c.g.timeout)
	defer cancel()
	noun := func() string {
		if len(c.args) > 1 {
			return strings.TrimSuffix(c.args[1], "s")
		}
		return ""
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
		case len(c.args) == 2 && (c.args[1] == "nodes" || c.args[1] == "node" || c.args[1] == "no"):
			return c.getNodes(rctx, cl)
		case len(c.args) == 3 && noun() == "node":
			return c.getNode(rctx, cl, c.args[2])
		}
		return errors.New("usage: nodepulse get nodes | get node NAME")
	case "describe":
		if len(c.args) != 3 || noun() != "node" {
			return errors.New("usage: nodepulse describe node NAME")
		}
		return c.describe(rctx, cl, c.args[2])
	case "explain":
		if len(c.args) != 3 || noun() != "node" {
			return errors.New("usage: nodepulse explain node NAME")
		}
		return c.explain(rctx, cl, c.args[2])
	case "watch":
		if len(c.args) != 2 || noun() != "node" {
			return errors.New("usage: nodepulse watch nodes [-l selector]")
		}
		return c.watch(c.g.ctx(ctx), cl)
	case "cordon", "uncordon":
		if err := c.need(2, verb+" NAME"); err != nil {
			return err
		}
		return c.cordon(rctx, cl, c.args[1], verb == "cordon")
	case "taint":
		if err := c.need(3, "taint NAME key[=value]:Effect | taint NAME key[:Effect]-"); err != nil {
			return err
		}
		return c.taint(rctx, cl, c.args[1], c.args[2])
	case "delete":
		if len(c.args) != 3 || noun() != "node" {
			return errors.New("usage: nodepulse delete node NAME")
		}
		if _, err := cl.DeleteNode(rctx, &nodev1.DeleteNodeRequest{Name: c.args[2]}); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "node/%s deleted\n", c.args[2])
		return nil
	case "request-status":
		if err := c.need(2, "request-status NAME"); err != nil {
			return err
		}
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
	return fmt.Errorf("unknown command %q (see nodepulse --help)", verb)
}

func (c *command) certs() error {
	if c.dir == "" {
		return errors.New("certs init: --dir is required")
	}
	req := devca.Request{Dir: c.dir, Hosts: split(c.hosts), Nodes: split(c.nodes), Operators: split(c.operators)}
	if err := devca.Generate(req); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "certificates written to %s: ca.crt, server.crt (servers and component clients)", c.dir)
	for _, n := range req.Nodes {
		fmt.Fprintf(c.out, ", node-%s.crt", n)
	}
	for _, o := range req.Operators {
		fmt.Fprintf(c.out, ", operator-%s.crt", o)
	}
	fmt.Fprintln(c.out)
	return nil
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
