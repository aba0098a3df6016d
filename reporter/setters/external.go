// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package setters

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// dnsSubdomain is a DNS-1123 subdomain, what Kubernetes accepts as a
// host name: lower-case labels of letters, digits and '-', joined by dots.
var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// ParseExternalAddresses turns --external-address values into node
// addresses: an IP becomes ExternalIP, a host name ExternalDNS, in the
// order given, duplicates dropped. Without a cloud provider nothing else
// can know a node's public addresses (upstream, the cloud node controller
// sets them).
func ParseExternalAddresses(values []string) ([]*nodev1.NodeAddress, error) {
	var out []*nodev1.NodeAddress
	seen := map[string]bool{}
	var errs []error
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" || seen[v] {
			continue
		}
		seen[v] = true
		if ip := net.ParseIP(v); ip != nil {
			if ip.IsUnspecified() || ip.IsLoopback() || ip.IsMulticast() || ip.IsLinkLocalUnicast() {
				errs = append(errs, fmt.Errorf("external address %q: an unspecified, loopback, multicast or link-local IP cannot reach the node from outside", v))
				continue
			}
			out = append(out, &nodev1.NodeAddress{Type: nodemodel.AddressExternalIP, Address: ip.String()})
			continue
		}
		if len(v) > 253 || !dnsSubdomain.MatchString(v) || hasLongLabel(v) {
			errs = append(errs, fmt.Errorf("external address %q: neither an IP address nor a lower-case DNS name (RFC 1123; no ports or schemes)", v))
			continue
		}
		out = append(out, &nodev1.NodeAddress{Type: nodemodel.AddressExternalDNS, Address: v})
	}
	return out, errors.Join(errs...)
}

func hasLongLabel(name string) bool {
	for _, l := range strings.Split(name, ".") {
		if len(l) > 63 {
			return true
		}
	}
	return false
}
