// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package app

import (
	"io"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/services/admin"
)

// TestExternalAddressFlag: --external-address repeats and takes lists; a
// value that is neither an IP nor a DNS name stops the reporter at start.
func TestExternalAddressFlag(t *testing.T) {
	cfg := DefaultConfig()
	fs := newService(&cfg, io.Discard).Flags
	if err := fs.Parse([]string{"--external-address=203.0.113.9", "--external-address", "edge.example.com, 198.51.100.1",
		"--container-runtime-endpoint=", "--docker-endpoint="}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"203.0.113.9", "edge.example.com", "198.51.100.1"}; !slices.Equal(cfg.ExternalAddresses, want) {
		t.Fatalf("external addresses %v, want %v", cfg.ExternalAddresses, want)
	}
	if len(cfg.ContainerRuntimeEndpoints) != 0 || cfg.DockerEndpoint != "" {
		t.Fatalf("runtime endpoints %v / %q not turned off", cfg.ContainerRuntimeEndpoints, cfg.DockerEndpoint)
	}
	bad := testConfig("127.0.0.1:1")
	bad.ExternalAddresses = []string{"edge.example.com:8443"}
	if _, err := New(bad, zap.NewNop(), admin.NewRegistry()); err == nil || !strings.Contains(err.Error(), "--external-address") {
		t.Fatalf("New with an address and port: %v", err)
	}
	bad = testConfig("127.0.0.1:1")
	bad.DockerEndpoint = "tcp://127.0.0.1:2375"
	if _, err := New(bad, zap.NewNop(), admin.NewRegistry()); err == nil || !strings.Contains(err.Error(), "--docker-endpoint") {
		t.Fatalf("New with a TCP Docker endpoint: %v", err)
	}
}
