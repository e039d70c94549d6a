package main

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// reach is where devices find a gateway listening on an address.
type reach struct {
	Local string   // the web app from this machine: http://localhost:8787/
	LAN   []string // from other machines on the network: http://192.168.1.23:8787/
	// Pair is the web app address a pairing link names: --public-url, else
	// the first LAN address, else Local.
	Pair string
	// LoopbackOnly says only this machine can connect (--listen 127.0.0.1:…).
	LoopbackOnly bool
	// Container says the gateway's only links are virtual cables to
	// another network namespace (a container on a bridge network), whose
	// addresses a phone cannot reach, and no --public-url says which are.
	Container bool
}

// webApp is the web app's address for links a device opens, such as a
// tap on an ntfy notification: the one pairing links name. In a container
// without --public-url none is known ("").
func (r reach) webApp() string {
	if r.Container {
		return ""
	}
	return r.Pair
}

// machineReach is reachOf with this machine's interfaces. A container on
// a bridge network sees only its end of a virtual cable (veth): no LAN
// address is offered, and Container says why. With host networking (or
// macvlan) the container sees real interfaces, and their addresses are
// offered like a host's: the decision is the interfaces', not a marker
// file's.
func machineReach(listen, public string) (reach, error) {
	ifs := hostIfaces()
	r, err := reachOf(listen, public, lanAddrs(ifs))
	if err == nil && public == "" && len(r.LAN) == 0 && !r.LoopbackOnly && bridged(ifs) {
		r.Container = true
	}
	return r, err
}

// bridged reports whether every up interface but loopback is one end of
// a veth pair, as in a container on a bridge network.
func bridged(ifs []iface) bool {
	seen := false
	for _, f := range ifs {
		if !f.Up {
			continue
		}
		if !f.Veth {
			return false
		}
		seen = true
	}
	return seen
}

// WS is the WebSocket address next to a web app address.
func wsOf(web string) string {
	u, err := url.Parse(web)
	if err != nil {
		return web
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/ws"
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}

// reachOf works out the addresses for a listen address (as given to
// --listen, or as bound) with this machine's interfaces.
func reachOf(listen, public string, lan []netip.Addr) (reach, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return reach{}, fmt.Errorf("listen address %q: %w", listen, err)
	}
	web := func(h string) string { return "http://" + net.JoinHostPort(h, port) + "/" }
	var r reach
	ip, ipErr := netip.ParseAddr(host)
	switch {
	case host == "" || ipErr == nil && ip.IsUnspecified():
		r.Local = web("localhost")
		for _, a := range lan {
			if ip.Is4() && !a.Is4() { // 0.0.0.0 takes IPv4 only
				continue
			}
			r.LAN = append(r.LAN, web(a.String()))
		}
	case ipErr == nil && ip.IsLoopback(), host == "localhost":
		r.Local, r.LoopbackOnly = web(host), true
	default: // one address, or a name
		r.Local = web(host)
		r.LAN = []string{r.Local}
	}
	r.Pair = r.Local
	if len(r.LAN) > 0 {
		r.Pair = r.LAN[0]
	}
	if public != "" {
		u, err := url.Parse(public)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return reach{}, fmt.Errorf("--public-url %q: want the web app's address, like https://iris.example.com/", public)
		}
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		r.Pair = u.String()
	}
	return r, nil
}

// iface is what lanAddrs needs of a network interface.
type iface struct {
	Name  string
	Up    bool // up, and not loopback
	Veth  bool // one end of a virtual cable to another network namespace
	Addrs []netip.Addr
}

// hostIfaces lists this machine's interfaces.
func hostIfaces() []iface {
	list, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []iface
	for _, in := range list {
		f := iface{Name: in.Name, Up: in.Flags&net.FlagUp != 0 && in.Flags&net.FlagLoopback == 0, Veth: isVeth(in.Name)}
		addrs, _ := in.Addrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				f.Addrs = append(f.Addrs, p.Addr())
			}
		}
		out = append(out, f)
	}
	return out
}

// virtualIface names interfaces of containers and VMs on this machine:
// a phone cannot reach their addresses.
func virtualIface(name string) bool {
	for _, p := range []string{"docker", "br-", "veth", "virbr", "vnet", "cni", "flannel", "podman", "lxc", "lxdbr", "vmnet", "vboxnet", "kube"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// lanAddrs lists the addresses a device on the local network can use:
// up interfaces' unicast addresses (not loopback, not link-local, not a
// container bridge), private IPv4 first, then other IPv4, then IPv6.
func lanAddrs(ifs []iface) []netip.Addr {
	var out []netip.Addr
	for _, f := range ifs {
		if !f.Up || f.Veth || virtualIface(f.Name) {
			continue
		}
		for _, a := range f.Addrs {
			a = a.Unmap()
			if a.IsLoopback() || a.IsLinkLocalUnicast() || !a.IsGlobalUnicast() || slices.Contains(out, a) {
				continue
			}
			out = append(out, a)
		}
	}
	rank := func(a netip.Addr) int {
		switch {
		case a.Is4() && a.IsPrivate():
			if a.As4()[0] == 192 {
				return 0 // home Wi-Fi, most often
			}
			return 1
		case a.Is4():
			return 2
		case a.IsPrivate():
			return 3
		}
		return 4
	}
	slices.SortStableFunc(out, func(a, b netip.Addr) int { return rank(a) - rank(b) })
	return out
}

// cliName is how to run irisgate's commands the way this process was
// started: "go run ./cmd/irisgate" for go run from a checkout, the name on
// the PATH, or the path it was run by. IRISGATE_CLI overrides it (the
// container image sets it to a docker command).
func cliName() string {
	if v := strings.TrimSpace(os.Getenv("IRISGATE_CLI")); v != "" {
		return v
	}
	exe, _ := os.Executable()
	st, err := os.Stat(filepath.Join("cmd", "irisgate"))
	checkout := err == nil && st.IsDir()
	return cliNameFor(exe, os.Args[0], checkout, func(name string) string {
		if p, err := exec.LookPath(name); err == nil && sameFile(p, exe) {
			return p
		}
		return ""
	})
}

// cliNameFor is cliName for an executable exe run as arg0, from a
// checkout of irisgate or not; onPath says where a name finds exe on the
// PATH ("" where it finds another program or none).
func cliNameFor(exe, arg0 string, checkout bool, onPath func(string) string) string {
	if strings.Contains(exe, string(filepath.Separator)+"go-build") && filepath.Base(filepath.Dir(exe)) == "exe" {
		// go run builds into $GOTMPDIR/go-build…/b001/exe/.
		if checkout {
			return "go run ./cmd/irisgate"
		}
		return "go run github.com/irisgate/irisgate/cmd/irisgate@latest"
	}
	if !strings.ContainsRune(arg0, filepath.Separator) {
		return arg0 // found on the PATH
	}
	if base := filepath.Base(arg0); onPath(base) != "" {
		return base
	}
	return shellQuote(arg0)
}

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
