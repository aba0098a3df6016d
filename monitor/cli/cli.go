// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package cli is the nodepulse command line, built on cobra: kubectl-like
// views of the monitor's gRPC services (get, describe, watch, explain) and
// the operator's changes (cordon, uncordon, taint, drain, delete, ...),
// plus development certificates (certs init) and kubeconfig contexts
// (kubeconfig) that serve kubectl and this CLI alike. It talks to the
// monitor only through the generated gRPC clients and shares nothing with
// the monitor's internals, so it can be read (and built) alone.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/services/flagenv"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/services/identity/devca"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
	"github.com/nodepulse/nodepulse/services/version"
)

// EnvPrefix of the CLI's environment variables (NODEPULSE_SERVER ...).
const EnvPrefix = "NODEPULSE"

// globals are the connection settings every command that talks to the
// monitor uses. Only these have environment variables (NODEPULSE_SERVER,
// ...): they are the same for every command of a session, where an
// environment variable for -o or -l would silently change the output of
// every command run after it.
type globals struct {
	server  string
	token   string
	tls     tlsconfig.Config
	timeout time.Duration
	// kubeconfig and context select a kubeconfig context that carries the
	// connection (see kubeconfig.go).
	kubeconfig, context string
	// flags are the root's persistent flags, to tell a given flag from its
	// default.
	flags *pflag.FlagSet
	// fromEnv: flags set from the environment.
	fromEnv map[string]bool
	lookup  func(string) (string, bool)
	// tmpDir holds credentials a kubeconfig embeds, written for this run.
	tmpDir string
}

// envFlags are the flags with an environment variable.
var envFlags = []string{"server", "token", "tls-cert", "tls-key", "tls-ca", "tls-server-name", "timeout", "context"}

// EnvName is the environment variable of connection flag name.
func EnvName(name string) string { return flagenv.EnvName(EnvPrefix, name) }

func (g *globals) register(fs *pflag.FlagSet) {
	g.flags = fs
	fs.StringVar(&g.server, "server", "", fmt.Sprintf("monitor gRPC address (host:port, or a comma-separated list); default: the kubeconfig context's, else 127.0.0.1:%d", admin.MonitorGRPCPort))
	fs.StringVar(&g.token, "token", "", "bearer token for changes on a plaintext monitor (its --auth.operator-token)")
	fs.StringVar(&g.tls.CertFile, "tls-cert", "", "client certificate (operator-<name>.crt from certs init)")
	fs.StringVar(&g.tls.KeyFile, "tls-key", "", "key of --tls-cert")
	fs.StringVar(&g.tls.CAFile, "tls-ca", "", "CA that verifies the monitor (ca.crt)")
	fs.StringVar(&g.tls.ServerName, "tls-server-name", "", "name to verify in the monitor's certificate (default: host of --server)")
	fs.DurationVar(&g.timeout, "timeout", 10*time.Second, "timeout of each request (drain: of the whole drain, unlimited unless given)")
	fs.StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig whose context gives the connection (default: $KUBECONFIG, else ~/.kube/config); see 'nodepulse kubeconfig --help'")
	fs.StringVar(&g.context, "context", "", "kubeconfig context to use (default: its current-context, when that is a nodepulse context)")
	for _, name := range envFlags {
		f := fs.Lookup(name)
		f.Usage += " [$" + EnvName(name) + "]"
	}
}

// applyEnv sets the connection flags not given on the command line from
// the environment. It sets the values without marking the flags changed,
// so drain's "--timeout given" still means the command line.
func (g *globals) applyEnv() error {
	g.fromEnv = map[string]bool{}
	var errs []error
	for _, name := range envFlags {
		f := g.flags.Lookup(name)
		if f.Changed {
			continue
		}
		if v, ok := g.lookup(EnvName(name)); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("environment %s=%q: %w", EnvName(name), v, err))
			}
			g.fromEnv[name] = true
		}
	}
	return errors.Join(errs...)
}

// set reports whether flag name was given, on the command line or in the
// environment.
func (g *globals) set(name string) bool { return g.flags.Lookup(name).Changed || g.fromEnv[name] }

// resolve completes the connection: flags and environment first, then the
// kubeconfig context, then the defaults. TLS is used when a certificate, key
// or CA is set; otherwise the connection is plaintext (development).
func (g *globals) resolve() error {
	kc, err := g.loadContext()
	if err != nil {
		return err
	}
	if kc != nil {
		if !g.set("server") {
			g.server = kc.grpc.Server
		}
		if !g.set("tls-server-name") {
			g.tls.ServerName = kc.grpc.TLSServerName
		}
		// The credentials come as a set: a certificate from a flag with
		// the context's key would be a pair that never matches.
		if !g.set("tls-cert") && !g.set("tls-key") && !g.set("tls-ca") {
			g.tls.CertFile, g.tls.KeyFile, g.tls.CAFile = kc.cert, kc.key, kc.ca
		}
		if !g.set("token") {
			g.token = kc.token
		}
	}
	if g.server == "" {
		g.server = fmt.Sprintf("127.0.0.1:%d", admin.MonitorGRPCPort)
	}
	return nil
}

func (g *globals) dial() (*grpc.ClientConn, error) {
	if err := g.resolve(); err != nil {
		return nil, err
	}
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

func (g *globals) cleanup() {
	if g.tmpDir != "" {
		_ = os.RemoveAll(g.tmpDir)
	}
}

// command is one parsed invocation.
type command struct {
	g      globals
	in     io.Reader
	out    io.Writer
	errOut io.Writer
	args   []string
	// per-command flags
	selector, condition, output, rv string
	dir, hosts, nodes, operators    string
	namespace, node, file           string
	allNamespaces, watchFlag        bool
	// delete pod: --grace-period (-1: the pod's own) and --force
	gracePeriod int64
	force       bool
	drainFlags  drainFlags
	// scale: --replicas (-1: not given)
	replicas        int64
	kubeconfigFlags kubeconfigFlags
}

// Main runs the CLI with args (without the program name), reading
// standard input for `create -f -`.
func Main(ctx context.Context, args []string, out, errOut io.Writer) error {
	return execute(ctx, args, os.Stdin, out, errOut)
}

func execute(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) error {
	c := &command{in: in, out: out, errOut: errOut}
	c.g.lookup = os.LookupEnv
	root := c.newRoot()
	root.SetArgs(args)
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	defer c.g.cleanup()
	return root.ExecuteContext(ctx)
}

// NewCommand returns the nodepulse command tree (for documentation and
// completion generators); Main runs it.
func NewCommand(out, errOut io.Writer) *cobra.Command {
	c := &command{out: out, errOut: errOut}
	c.g.lookup = os.LookupEnv
	return c.newRoot()
}

const rootLong = `nodepulse looks at and operates the nodes a nodepulse monitor serves, over
its gRPC API, with kubectl's verbs and output.

The connection comes from --server and the --tls-* flags (or their
NODEPULSE_* environment variables), else from a kubeconfig context written by
'nodepulse kubeconfig' (the same file kubectl uses), else 127.0.0.1:9091 in
plaintext. TLS is used when a certificate, key or CA is set; otherwise the
connection is plaintext (development).`

func (c *command) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "nodepulse",
		Short:         "look at and operate the nodes a nodepulse monitor serves",
		Long:          rootLong,
		Version:       version.String(),
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return c.g.applyEnv()
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	c.g.register(root.PersistentFlags())
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())
	})
	root.AddGroup(&cobra.Group{ID: "basic", Title: "Looking at nodes and workloads:"},
		&cobra.Group{ID: "ops", Title: "Operating nodes and workloads:"},
		&cobra.Group{ID: "setup", Title: "Setting up:"})
	for _, cmd := range c.commands() {
		root.AddCommand(cmd)
	}
	return root
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
