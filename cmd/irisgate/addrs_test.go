package main

import (
	"net/netip"
	"os"
	"testing"
)

// TestContainerDecidedByInterfaces: a gateway whose only links are veth
// ends (a container on a bridge network) offers no LAN address and says
// so; one with a real interface offers it, marker file or not (host
// networking, or a VM that leaves /.dockerenv about).
func TestContainerDecidedByInterfaces(t *testing.T) {
	a := netip.MustParseAddr
	bridge := []iface{{Name: "lo"}, {Name: "eth0", Up: true, Veth: true, Addrs: []netip.Addr{a("172.17.0.2")}}}
	host := []iface{{Name: "lo"}, {Name: "eth0", Up: true, Addrs: []netip.Addr{a("192.168.1.23")}}, {Name: "docker0", Up: true, Addrs: []netip.Addr{a("172.17.0.1")}}}
	if got := lanAddrs(bridge); len(got) != 0 || !bridged(bridge) {
		t.Errorf("on a bridge network: %v, bridged %v", got, bridged(bridge))
	}
	if got := lanAddrs(host); len(got) != 1 || got[0] != a("192.168.1.23") || bridged(host) {
		t.Errorf("with host networking: %v, bridged %v", got, bridged(host))
	}
	if isVeth("lo") {
		t.Error("lo is not a veth")
	}
	// This machine, as it is.
	ifs := hostIfaces()
	r, err := machineReach(":8787", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/.dockerenv"); err == nil && len(lanAddrs(ifs)) > 0 && (r.Container || len(r.LAN) == 0) {
		t.Errorf("/.dockerenv is here but so are real interfaces %v: %+v", ifs, r)
	}
	if r.Container != bridged(ifs) {
		t.Errorf("machineReach: container %v, the interfaces say %v (%v)", r.Container, bridged(ifs), ifs)
	}
}
