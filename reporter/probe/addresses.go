// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package probe

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Resolver is how NodeIP looks at the network; tests replace it.
type Resolver struct {
	// LookupIP resolves a host name.
	LookupIP func(ctx context.Context, host string) ([]net.IP, error)
	// InterfaceIPs lists the addresses of one interface, or of every
	// interface when name is "".
	InterfaceIPs func(name string) ([]net.IP, error)
}

// SystemResolver uses the process's DNS configuration and network namespace
// (run the reporter with host networking to see the host's interfaces).
func SystemResolver() Resolver {
	return Resolver{
		LookupIP: func(ctx context.Context, host string) ([]net.IP, error) {
			addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
			ips := make([]net.IP, 0, len(addrs))
			for _, a := range addrs {
				ips = append(ips, a.IP)
			}
			return ips, err
		},
		InterfaceIPs: interfaceIPs,
	}
}

func interfaceIPs(name string) ([]net.IP, error) {
	var addrs []net.Addr
	if name == "" {
		a, err := net.InterfaceAddrs()
		if err != nil {
			return nil, err
		}
		addrs = a
	} else {
		ifc, err := net.InterfaceByName(name)
		if err != nil {
			return nil, err
		}
		if addrs, err = ifc.Addrs(); err != nil {
			return nil, err
		}
	}
	ips := make([]net.IP, 0, len(addrs))
	for _, a := range addrs {
		switch v := a.(type) {
		case *net.IPNet:
			ips = append(ips, v.IP)
		case *net.IPAddr:
			ips = append(ips, v.IP)
		}
	}
	return ips, nil
}

// ValidNodeIP reports whether ip may be a node's address: not loopback,
// multicast, link-local or unspecified (spec §5.1).
func ValidNodeIP(ip net.IP) bool {
	return ip != nil && !ip.IsLoopback() && !ip.IsMulticast() && !ip.IsLinkLocalUnicast() &&
		!ip.IsLinkLocalMulticast() && !ip.IsUnspecified()
}

// dnsTimeout bounds the name lookup so an unreachable DNS server delays a
// status tick by at most this, never blocks it.
const dnsTimeout = 2 * time.Second

// NodeIP chooses the node's InternalIP the way the kubelet does without a
// cloud provider (spec §5.1): the configured IP (which must be valid and
// belong to the host); else the node name if it is an IP; else the node
// name's DNS answer (first valid IPv4, else first valid IPv6); else the first
// valid address of the default-route interface from the host's
// /proc/net/route. It errors only when all of these fail.
func (p *Prober) NodeIP(ctx context.Context, r Resolver, nodeName, configured string) (net.IP, error) {
	if configured != "" {
		ip := net.ParseIP(configured)
		if ip == nil {
			return nil, fmt.Errorf("node IP %q is not an IP address", configured)
		}
		if !ValidNodeIP(ip) {
			return nil, fmt.Errorf("node IP %s is loopback, multicast, link-local or unspecified", ip)
		}
		host, err := r.InterfaceIPs("")
		if err != nil {
			return nil, fmt.Errorf("list host addresses to check node IP %s: %w", ip, err)
		}
		for _, h := range host {
			if h.Equal(ip) {
				return ip, nil
			}
		}
		return nil, fmt.Errorf("node IP %s is not an address of this host", ip)
	}
	if ip := net.ParseIP(nodeName); ip != nil && ValidNodeIP(ip) {
		return ip, nil
	}
	var dnsErr error
	if r.LookupIP != nil {
		lctx, cancel := context.WithTimeout(ctx, dnsTimeout)
		ips, err := r.LookupIP(lctx, nodeName)
		cancel()
		dnsErr = err
		if ip := pickIP(ips); ip != nil {
			return ip, nil
		}
	}
	iface, err := p.DefaultRouteInterface()
	if err == nil {
		ips, ierr := r.InterfaceIPs(iface)
		if ip := pickIP(ips); ip != nil {
			return ip, nil
		}
		err = fmt.Errorf("default-route interface %s has no valid address (%v)", iface, ierr)
	}
	return nil, fmt.Errorf("can't get ip address of node %s: DNS: %v; %v", nodeName, dnsErr, err)
}

// pickIP returns the first valid IPv4 address, else the first valid IPv6.
func pickIP(ips []net.IP) net.IP {
	var v6 net.IP
	for _, ip := range ips {
		if !ValidNodeIP(ip) {
			continue
		}
		if v4 := ip.To4(); v4 != nil {
			return v4
		}
		if v6 == nil {
			v6 = ip
		}
	}
	return v6
}

// DefaultRouteInterface returns the interface of the IPv4 default route with
// the lowest metric, read from the host's /proc/net/route.
func (p *Prober) DefaultRouteInterface() (string, error) {
	f, err := os.Open(p.path("proc/net/route"))
	if err != nil {
		return "", fmt.Errorf("read routes: %w", err)
	}
	defer f.Close()
	const rtfUp = 0x1
	best, bestMetric := "", int64(-1)
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if len(fl) < 8 || fl[1] != "00000000" || fl[7] != "00000000" {
			continue
		}
		flags, err := strconv.ParseInt(fl[3], 16, 64)
		if err != nil || flags&rtfUp == 0 {
			continue
		}
		metric, _ := strconv.ParseInt(fl[6], 10, 64)
		if best == "" || metric < bestMetric {
			best, bestMetric = fl[0], metric
		}
	}
	if best == "" {
		return "", fmt.Errorf("no default route in %s", p.path("proc/net/route"))
	}
	return best, nil
}
