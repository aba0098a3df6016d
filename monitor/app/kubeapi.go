// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package app

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi"
	"github.com/nodepulse/nodepulse/services/tlsconfig"
)

// DefaultKubeAPIAddress is where the Kubernetes-compatible API listens by
// default (kube-apiserver's secure port).
const DefaultKubeAPIAddress = ":6443"

// KubeAPIConfig configures the Kubernetes-compatible HTTP API.
type KubeAPIConfig struct {
	// ListenAddress: "" disables the API.
	ListenAddress string
	// TLSCert and TLSKey: the server certificate (default: the gRPC one).
	// Client certificates are verified against --grpc.tls-ca.
	TLSCert, TLSKey string
	// Insecure serves plaintext (development only, like --grpc.insecure).
	Insecure bool
}

// RegisterFlags adds the --kube-api.* flags.
func (c *KubeAPIConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.ListenAddress, "kube-api.listen-address", DefaultKubeAPIAddress, "address of the Kubernetes-compatible HTTPS API that kubectl and client-go use (nodes, pods, leases, events ...); empty disables it")
	fs.StringVar(&c.TLSCert, "kube-api.tls-cert", "", "server certificate `file` of the Kubernetes-compatible API (default: --grpc.tls-cert); client certificates are verified against --grpc.tls-ca")
	fs.StringVar(&c.TLSKey, "kube-api.tls-key", "", "private key `file` of --kube-api.tls-cert (default: --grpc.tls-key)")
	fs.BoolVar(&c.Insecure, "kube-api.insecure", false, "serve the Kubernetes-compatible API in plaintext without client certificates (development only; changes then need --auth.operator-token as a bearer token when one is set)")
}

// kubeServer runs the API on its listener.
type kubeServer struct {
	h   *kubeapi.Server
	ln  net.Listener
	tls *tls.Config
}

// newKubeServer listens at once, so a port clash fails New. Without a
// certificate (a plaintext gRPC monitor) and without --kube-api.insecure
// the API stays off with a warning: plaintext is only ever explicit.
func newKubeServer(c KubeAPIConfig, grpcTLS tlsconfig.Config, b kubeapi.Backends, lg *zap.Logger, reg prometheus.Registerer) (*kubeServer, error) {
	if c.ListenAddress == "" {
		return nil, nil
	}
	lg = lg.Named("kube-api")
	var tlsCfg *tls.Config
	if !c.Insecure {
		tc := tlsconfig.Config{CertFile: c.TLSCert, KeyFile: c.TLSKey, CAFile: grpcTLS.CAFile}
		if tc.CertFile == "" {
			tc.CertFile, tc.KeyFile = grpcTLS.CertFile, grpcTLS.KeyFile
		}
		if tc.CertFile == "" {
			lg.Warn("Kubernetes-compatible API off: no TLS certificate (set --kube-api.tls-cert/--kube-api.tls-key or the --grpc.tls-* files, or --kube-api.insecure for plaintext development use)")
			return nil, nil
		}
		var err error
		if tlsCfg, err = tc.ServerReloading(tlsconfig.Options{Role: "kube-api-server", Logger: lg.Named("tls"), Registerer: reg}); err != nil {
			return nil, fmt.Errorf("kube API TLS: %w", err)
		}
	}
	ln, err := net.Listen("tcp", c.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("kube API listen on %s: %w", c.ListenAddress, err)
	}
	if c.Insecure {
		lg.Warn("Kubernetes-compatible API in PLAINTEXT: anyone who can reach it reads the fleet (and changes it without --auth.operator-token); development only", zap.String("address", ln.Addr().String()))
	} else {
		lg.Info("Kubernetes-compatible API listening", zap.String("address", ln.Addr().String()))
	}
	h, err := kubeapi.New(b, lg, ln.Addr().String())
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return &kubeServer{h: h, ln: ln, tls: tlsCfg}, nil
}

// Run serves until ctx ends.
func (k *kubeServer) Run(ctx context.Context) error { return k.h.Serve(ctx, k.ln, k.tls) }
