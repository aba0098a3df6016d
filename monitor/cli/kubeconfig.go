// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodepulse/nodepulse/services/admin"
)

// ExtensionName names the kubeconfig cluster extension that records the
// monitor's gRPC address next to its Kubernetes API URL. One context then
// serves kubectl (the cluster's server, CA, the user's certificate or
// token) and this CLI (the same credentials, the extension's address).
// kubectl keeps extensions it does not know when it rewrites the file
// (config use-context ...).
const ExtensionName = "nodepulse.io/grpc"

// GRPCExtension is the extension's content.
type GRPCExtension struct {
	// Server is the monitor's gRPC address (host:port, or a list).
	Server string `json:"server"`
	// TLSServerName is the name to verify in the monitor's certificate
	// when it is not the host of Server (port-forwarding).
	TLSServerName string `json:"tlsServerName,omitempty"`
}

// kubeContext is the connection a kubeconfig context gives this CLI.
type kubeContext struct {
	name                string
	grpc                GRPCExtension
	cert, key, ca       string
	token               string
	plaintext, explicit bool
}

func (g *globals) rules() *clientcmd.ClientConfigLoadingRules {
	r := clientcmd.NewDefaultClientConfigLoadingRules()
	r.ExplicitPath = g.kubeconfig
	return r
}

// loadContext returns the kubeconfig context to connect with: --context,
// else the file's current-context when it is a nodepulse context (a
// current context of another cluster is none of this CLI's business), else
// nil.
func (g *globals) loadContext() (*kubeContext, error) {
	cfg, err := g.rules().Load()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	name, explicit := g.context, g.context != ""
	if !explicit {
		name = cfg.CurrentContext
	}
	if name == "" {
		return nil, nil
	}
	kctx := cfg.Contexts[name]
	if kctx == nil {
		if explicit {
			return nil, fmt.Errorf("kubeconfig: no context %q", name)
		}
		return nil, nil
	}
	cluster := cfg.Clusters[kctx.Cluster]
	var ext GRPCExtension
	if cluster != nil {
		if u, ok := cluster.Extensions[ExtensionName].(*runtime.Unknown); ok {
			if err := json.Unmarshal(u.Raw, &ext); err != nil {
				return nil, fmt.Errorf("kubeconfig context %q: extension %s: %w", name, ExtensionName, err)
			}
		}
	}
	if ext.Server == "" {
		if explicit {
			return nil, fmt.Errorf("kubeconfig context %q has no nodepulse gRPC address (write it with 'nodepulse kubeconfig --grpc-server ...')", name)
		}
		return nil, nil
	}
	kc := &kubeContext{name: name, grpc: ext, explicit: explicit, plaintext: strings.HasPrefix(cluster.Server, "http://")}
	if ext.TLSServerName == "" {
		kc.grpc.TLSServerName = cluster.TLSServerName
	}
	if kc.plaintext {
		kc.grpc.TLSServerName = ""
	} else {
		if kc.ca, err = g.credFile(cluster.CertificateAuthority, cluster.CertificateAuthorityData, "ca.crt"); err != nil {
			return nil, err
		}
	}
	if user := cfg.AuthInfos[kctx.AuthInfo]; user != nil {
		kc.token = user.Token
		if user.TokenFile != "" {
			b, err := os.ReadFile(user.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("kubeconfig context %q: %w", name, err)
			}
			kc.token = strings.TrimSpace(string(b))
		}
		if !kc.plaintext {
			if kc.cert, err = g.credFile(user.ClientCertificate, user.ClientCertificateData, "client.crt"); err != nil {
				return nil, err
			}
			if kc.key, err = g.credFile(user.ClientKey, user.ClientKeyData, "client.key"); err != nil {
				return nil, err
			}
		}
	}
	return kc, nil
}

// credFile returns the file of a credential a kubeconfig names or embeds.
// The CLI's TLS reads files (as the servers do, to reload them), so
// embedded data is written to a private directory removed when the
// command ends.
func (g *globals) credFile(path string, data []byte, name string) (string, error) {
	if path != "" || len(data) == 0 {
		return path, nil
	}
	if g.tmpDir == "" {
		d, err := os.MkdirTemp("", "nodepulse-kubeconfig-")
		if err != nil {
			return "", fmt.Errorf("kubeconfig credentials: %w", err)
		}
		g.tmpDir = d
	}
	p := filepath.Join(g.tmpDir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return "", fmt.Errorf("kubeconfig credentials: %w", err)
	}
	return p, nil
}

// kubeconfigFlags are the flags of `nodepulse kubeconfig`.
type kubeconfigFlags struct {
	server, grpcServer, tlsServerName string
	ca, cert, key, token, context     string
	embed, setCurrent                 bool
}

const kubeconfigLong = `Write (or merge into) a kubeconfig a context for one nodepulse stack, so that
kubectl and this CLI reach its monitor with nothing but the context:

  kubectl --kubeconfig FILE get nodes        # the monitor's Kubernetes API (--server)
  nodepulse --kubeconfig FILE get nodes      # the monitor's gRPC API (--grpc-server)

The context, its cluster and its user are all named --context; an existing
entry of that name is replaced, every other entry of the file is kept. The
file is --kubeconfig, else the first file of $KUBECONFIG, else ~/.kube/config,
as for kubectl. The context becomes the current one unless
--set-current=false. Certificate and key paths are written relative to the
kubeconfig's directory when they are inside it (kubectl resolves them so), so
a certificate directory can be moved as a whole; --embed-certs copies the
files into the kubeconfig instead.

The monitor's gRPC address is kept in the cluster's extension "` + ExtensionName + `".
An http:// --server is a plaintext stack (make run, the compose stack): no
TLS and no client certificate on either API, only --token when the monitor
has --auth.operator-token.`

func (c *command) kubeconfigCommand() *cobra.Command {
	f := &c.kubeconfigFlags
	cmd := &cobra.Command{
		Use:     "kubeconfig --server URL [--ca CA --cert CRT --key KEY | --token T] [--context NAME] [--kubeconfig FILE]",
		Short:   "write a kubeconfig context for a nodepulse stack (kubectl and nodepulse)",
		Long:    kubeconfigLong,
		GroupID: "setup",
		Example: `  # make run / docker compose (plaintext on 127.0.0.1):
  nodepulse kubeconfig --kubeconfig .tmp/certs/kubeconfig --context nodepulse-local \
    --server http://127.0.0.1:6443 --grpc-server 127.0.0.1:9091
  kubectl --kubeconfig .tmp/certs/kubeconfig get nodes

  # Kubernetes, through kubectl port-forward svc/monitor 6443 9091:
  nodepulse kubeconfig --context nodepulse-prod --server https://127.0.0.1:6443 \
    --grpc-server 127.0.0.1:9091 --tls-server-name monitor.nodepulse.svc \
    --ca pki/ca.crt --cert pki/operator-admin.crt --key pki/operator-admin.key`,
		Args: args(0, 0),
		RunE: func(*cobra.Command, []string) error { return c.writeKubeconfig() },
	}
	fs := cmd.Flags()
	// --server, --token and --context shadow the root's connection flags:
	// here they describe the context to write.
	fs.StringVar(&f.server, "server", "", "the monitor's Kubernetes API URL (https://host:6443; http:// for a plaintext stack)")
	fs.StringVar(&f.grpcServer, "grpc-server", "", fmt.Sprintf("the monitor's gRPC address for this CLI (default: the host of --server, port %d)", admin.MonitorGRPCPort))
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "name to verify in the monitor's certificate (when --server's host is not in it, e.g. port-forwarding)")
	fs.StringVar(&f.ca, "ca", "", "CA that verifies the monitor (ca.crt)")
	fs.StringVar(&f.cert, "cert", "", "client certificate (operator-<name>.crt)")
	fs.StringVar(&f.key, "key", "", "key of --cert")
	fs.StringVar(&f.token, "token", "", "bearer token (the monitor's --auth.operator-token), instead of a certificate")
	fs.StringVar(&f.context, "context", "nodepulse", "name of the context, its cluster and its user")
	fs.BoolVar(&f.embed, "embed-certs", false, "copy the CA, certificate and key into the kubeconfig instead of naming their files")
	fs.BoolVar(&f.setCurrent, "set-current", true, "make the context the current one")
	_ = cmd.MarkFlagRequired("server")
	return cmd
}

// writeKubeconfig is `nodepulse kubeconfig`: read the file (or start an
// empty one), replace the context's three entries, write it back.
func (c *command) writeKubeconfig() error {
	f := c.kubeconfigFlags
	// The connection flags a user already types (--tls-ca ...) say the
	// same as --ca, --cert and --key here.
	for _, p := range []struct {
		dst       *string
		flag, val string
	}{{&f.ca, "tls-ca", c.g.tls.CAFile}, {&f.cert, "tls-cert", c.g.tls.CertFile}, {&f.key, "tls-key", c.g.tls.KeyFile}} {
		if *p.dst == "" && c.g.flags.Lookup(p.flag).Changed {
			*p.dst = p.val
		}
	}
	u, err := url.Parse(f.server)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("--server %q: want https://host:port (or http:// for a plaintext stack)", f.server)
	}
	plaintext := u.Scheme == "http"
	switch {
	case (f.cert == "") != (f.key == ""):
		return errors.New("--cert and --key go together")
	case plaintext && (f.ca != "" || f.cert != ""):
		return errors.New("--server is http:// (plaintext): --ca, --cert and --key need https://")
	case !plaintext && f.cert == "" && f.token == "":
		return errors.New("an https:// stack needs --cert and --key (an operator certificate) or --token")
	}
	grpcServer := f.grpcServer
	if grpcServer == "" {
		grpcServer = fmt.Sprintf("%s:%d", u.Hostname(), admin.MonitorGRPCPort)
	}
	path := c.g.rules().GetDefaultFilename()
	if path == "" {
		return errors.New("no kubeconfig path: give --kubeconfig")
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if errors.Is(err, os.ErrNotExist) {
		cfg, err = clientcmdapi.NewConfig(), nil
	}
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return err
	}
	ext, err := json.Marshal(GRPCExtension{Server: grpcServer})
	if err != nil {
		return err
	}
	cluster := clientcmdapi.NewCluster()
	cluster.Server = strings.TrimSuffix(f.server, "/")
	cluster.TLSServerName = f.tlsServerName
	cluster.Extensions[ExtensionName] = &runtime.Unknown{Raw: ext, ContentType: runtime.ContentTypeJSON}
	user := clientcmdapi.NewAuthInfo()
	user.Token = f.token
	for _, p := range []struct {
		file string
		path *string
		data *[]byte
	}{{f.ca, &cluster.CertificateAuthority, &cluster.CertificateAuthorityData}, {f.cert, &user.ClientCertificate, &user.ClientCertificateData},
		{f.key, &user.ClientKey, &user.ClientKeyData}} {
		if p.file == "" {
			continue
		}
		if f.embed {
			if *p.data, err = os.ReadFile(p.file); err != nil {
				return err
			}
			continue
		}
		if *p.path, err = relativeTo(dir, p.file); err != nil {
			return err
		}
	}
	kctx := clientcmdapi.NewContext()
	kctx.Cluster, kctx.AuthInfo = f.context, f.context
	cfg.Clusters[f.context], cfg.AuthInfos[f.context], cfg.Contexts[f.context] = cluster, user, kctx
	if f.setCurrent || cfg.CurrentContext == "" {
		cfg.CurrentContext = f.context
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	how := "mTLS"
	switch {
	case plaintext:
		how = "PLAINTEXT: no TLS, nothing authenticated"
	case f.cert == "":
		how = "TLS, bearer token"
	}
	fmt.Fprintf(c.out, "context %q written to %s: Kubernetes API %s, gRPC %s (%s)\n", f.context, path, cluster.Server, grpcServer, how)
	return nil
}

// relativeTo returns file relative to dir when it lies inside dir (kubectl
// resolves such a path against the kubeconfig's directory), else absolute.
func relativeTo(dir, file string) (string, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(dir, abs); err == nil && !strings.HasPrefix(rel, "..") {
		return rel, nil
	}
	return abs, nil
}

// configCommand is `nodepulse config`: the kubectl config verbs this CLI
// needs to switch between stacks without kubectl.
func (c *command) configCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "show and switch kubeconfig contexts (as kubectl config does)", GroupID: "setup"}
	cmd.AddCommand(&cobra.Command{
		Use: "get-contexts", Short: "list the kubeconfig's contexts; * marks the current one", Args: args(0, 0),
		RunE: func(*cobra.Command, []string) error {
			cfg, err := c.g.rules().Load()
			if err != nil {
				return err
			}
			names := make([]string, 0, len(cfg.Contexts))
			for n := range cfg.Contexts {
				names = append(names, n)
			}
			sort.Strings(names)
			tw := tabwriter.NewWriter(c.out, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "CURRENT\tNAME\tCLUSTER\tAUTHINFO\tSERVER\tGRPC")
			for _, n := range names {
				cur, x := "", cfg.Contexts[n]
				if n == cfg.CurrentContext {
					cur = "*"
				}
				server, grpcAddr := "", "<none>"
				if cl := cfg.Clusters[x.Cluster]; cl != nil {
					server = cl.Server
					if u, ok := cl.Extensions[ExtensionName].(*runtime.Unknown); ok {
						var e GRPCExtension
						if json.Unmarshal(u.Raw, &e) == nil && e.Server != "" {
							grpcAddr = e.Server
						}
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cur, n, x.Cluster, x.AuthInfo, server, grpcAddr)
			}
			return tw.Flush()
		},
	}, &cobra.Command{
		Use: "current-context", Short: "print the current context", Args: args(0, 0),
		RunE: func(*cobra.Command, []string) error {
			cfg, err := c.g.rules().Load()
			if err != nil {
				return err
			}
			if cfg.CurrentContext == "" {
				return errors.New("current-context is not set")
			}
			_, err = fmt.Fprintln(c.out, cfg.CurrentContext)
			return err
		},
	}, &cobra.Command{
		Use: "use-context NAME", Short: "make NAME the current context (for kubectl too)", Args: args(1, 1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			cfg, err := c.g.rules().Load()
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for n := range cfg.Contexts {
				names = append(names, n)
			}
			sort.Strings(names)
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, a []string) error {
			rules := c.g.rules()
			cfg, err := rules.GetStartingConfig()
			if err != nil {
				return err
			}
			if cfg.Contexts[a[0]] == nil {
				return fmt.Errorf("no context exists with the name: %q", a[0])
			}
			cfg.CurrentContext = a[0]
			if err := clientcmd.ModifyConfig(rules, *cfg, true); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.out, "Switched to context %q.\n", a[0])
			return err
		},
	})
	return cmd
}
