// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package setters

import (
	"testing"

	"github.com/nodepulse/nodepulse/services/nodemodel"
)

func TestParseExternalAddresses(t *testing.T) {
	got, err := ParseExternalAddresses([]string{"203.0.113.7", "node-1.example.com", " 2001:db8::1 ", "203.0.113.7", ""})
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{nodemodel.AddressExternalIP, "203.0.113.7"}, {nodemodel.AddressExternalDNS, "node-1.example.com"}, {nodemodel.AddressExternalIP, "2001:db8::1"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i, w := range want {
		if got[i].GetType() != w[0] || got[i].GetAddress() != w[1] {
			t.Errorf("address %d = %s %s, want %s %s", i, got[i].GetType(), got[i].GetAddress(), w[0], w[1])
		}
	}
	for _, bad := range []string{"127.0.0.1", "0.0.0.0", "::1", "169.254.1.1", "Node.Example.com", "node.example.com:443", "https://node.example.com",
		"-node.example.com", "node_1.example.com", string(make([]byte, 64)) + ".example.com"} {
		if _, err := ParseExternalAddresses([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestExternalAddressesAndRuntime: external addresses follow InternalIP and
// Hostname; the runtime version is reported as found, and emptied when the
// runtime goes away.
func TestExternalAddressesAndRuntime(t *testing.T) {
	c := cfg(t)
	ext, err := ParseExternalAddresses([]string{"198.51.100.4", "edge-4.example.net"})
	if err != nil {
		t.Fatal(err)
	}
	c.ExternalAddresses = ext
	in := inputs()
	in.RuntimeVersion = "containerd://1.7.27"
	st := Apply(t0, c, in, nil).Status
	var types []string
	for _, a := range st.GetAddresses() {
		types = append(types, a.GetType()+"="+a.GetAddress())
	}
	want := []string{"InternalIP=" + in.NodeIP.String(), "Hostname=" + c.NodeName, "ExternalIP=198.51.100.4", "ExternalDNS=edge-4.example.net"}
	if len(types) != len(want) {
		t.Fatalf("addresses %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("addresses %v, want %v", types, want)
		}
	}
	if v := st.GetNodeInfo().GetContainerRuntimeVersion(); v != "containerd://1.7.27" {
		t.Errorf("containerRuntimeVersion %q", v)
	}
	if v := Apply(t1, c, inputs(), st).Status.GetNodeInfo().GetContainerRuntimeVersion(); v != "" {
		t.Errorf("containerRuntimeVersion %q after the runtime went away, want empty", v)
	}
}
