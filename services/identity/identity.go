// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package identity says who is calling a nodepulse server, from the peer's
// verified TLS client certificate, following Kubernetes conventions:
//
//	node:      CN "system:node:<node name>", O "system:nodes"
//	operator:  O "nodepulse:operators" (CN is the person or tool)
//	component: O "nodepulse:components" (collectors and monitors talking to
//	           each other; CN names the component)
//
// Without TLS (plaintext development mode) every caller is Anonymous, and
// each server decides what anonymous callers may do (logged loudly).
package identity

import (
	"context"
	"crypto/x509"
	"slices"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// NodeMetadata is the request metadata key in which a reporter names the
// node of its Report stream, so a collector that refuses the stream before
// reading its Register can still vouch that the node's reporter is alive
// (only when the caller is authorized for that name).
const NodeMetadata = "nodepulse-node"

// Role of a caller.
type Role string

// Roles.
const (
	Anonymous Role = "anonymous"
	Node      Role = "node"
	Operator  Role = "operator"
	Component Role = "component"
	// Unknown: a verified certificate that carries no nodepulse role.
	Unknown Role = "unknown"
)

// Certificate subject conventions.
const (
	NodeOrganization      = "system:nodes"
	NodeCommonNamePrefix  = "system:node:"
	OperatorOrganization  = "nodepulse:operators"
	ComponentOrganization = "nodepulse:components"
)

// Identity of a caller.
type Identity struct {
	Role Role
	// Name: the node name for nodes, the certificate CN otherwise.
	Name string
}

// String is "role:name", for logs.
func (i Identity) String() string {
	if i.Name == "" {
		return string(i.Role)
	}
	return string(i.Role) + ":" + i.Name
}

// FromCert derives the identity a verified certificate carries.
func FromCert(c *x509.Certificate) Identity {
	orgs := c.Subject.Organization
	cn := c.Subject.CommonName
	switch {
	case slices.Contains(orgs, NodeOrganization) && strings.HasPrefix(cn, NodeCommonNamePrefix):
		return Identity{Role: Node, Name: strings.TrimPrefix(cn, NodeCommonNamePrefix)}
	case slices.Contains(orgs, OperatorOrganization):
		return Identity{Role: Operator, Name: cn}
	case slices.Contains(orgs, ComponentOrganization):
		return Identity{Role: Component, Name: cn}
	}
	return Identity{Role: Unknown, Name: cn}
}

// FromContext returns the identity of the gRPC peer of ctx: from its verified
// client certificate, or Anonymous on a plaintext connection or one without a
// client certificate.
func FromContext(ctx context.Context) Identity {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return Identity{Role: Anonymous}
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return Identity{Role: Anonymous}
	}
	return FromCert(ti.State.VerifiedChains[0][0])
}
