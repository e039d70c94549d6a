package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// The addresses web_fetch never reaches unless the owner allows them:
// the gateway's own ports and the LAN behind it are not the web.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215: the IPv4 address in its last 32 bits
	v4Compat   = netip.MustParsePrefix("::/96")          // deprecated IPv4-compatible addresses (RFC 4291 2.5.5.1)
	sixToFour  = netip.MustParsePrefix("2002::/16")
	reserved   = []struct {
		p   netip.Prefix
		why string
	}{
		{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
		{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT (shared) address"},
		{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
		{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
		{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
		{netip.MustParsePrefix("100::/64"), "a discard address"},
		{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	}
)

// ErrPrivateAddress is why a fetch to a loopback, private or link-local
// address was refused.
var ErrPrivateAddress = errors.New("web_fetch does not reach loopback, private or link-local addresses")

// blockedAddr says why web_fetch may not connect to ip, or nil. allow are
// ranges the owner opened.
func blockedAddr(ip netip.Addr, allow []netip.Prefix) error {
	ip = ip.Unmap()
	for _, p := range allow {
		if p.Contains(ip) {
			return nil
		}
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip), nat64Local.Contains(ip), v4Compat.Contains(ip) && !ip.IsLoopback() && !ip.IsUnspecified():
		return blockedAddr(netip.AddrFrom4([4]byte(b[12:16])), allow)
	case sixToFour.Contains(ip):
		return blockedAddr(netip.AddrFrom4([4]byte(b[2:6])), allow)
	}
	why := ""
	switch {
	case ip.IsLoopback():
		why = "a loopback address"
	case ip.IsPrivate():
		why = "a private address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		why = "a link-local address"
	case ip.IsUnspecified():
		why = "the unspecified address"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		why = "a multicast address"
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		why = "the broadcast address"
	}
	for _, r := range reserved {
		if why == "" && r.p.Contains(ip) {
			why = r.why
		}
	}
	if why == "" {
		return nil
	}
	return &refusedAddr{ip: ip, why: why}
}

// refusedAddr is a connection the guard refused.
type refusedAddr struct {
	ip  netip.Addr
	why string
}

func (e *refusedAddr) Error() string {
	return fmt.Sprintf("%v: %s is %s (the owner can allow it with --web-allow)", ErrPrivateAddress, e.ip, e.why)
}

func (e *refusedAddr) Is(target error) bool { return target == ErrPrivateAddress }

// guardedClient is web_fetch's HTTP client: every connection, redirects
// included, is checked against the address it really goes to, after the
// name is resolved (a name that resolves to 127.0.0.1 is refused as the
// address is), and no proxy from the environment routes around that.
func guardedClient(allow []netip.Prefix, timeout time.Duration) *http.Client {
	d := &net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			if network != "tcp4" && network != "tcp6" {
				return fmt.Errorf("web_fetch: refusing a %s connection", network)
			}
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			return blockedAddr(ap.Addr(), allow)
		},
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  20 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConns:           8,
		IdleConnTimeout:        30 * time.Second,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("more than 5 redirects")
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("a redirect to %s: web_fetch reads http and https only", req.URL.Scheme)
			}
			return nil
		},
	}
}

// netErr is a fetch's error as the model should read it: the guard's
// refusal without the dial error around it.
func netErr(err error) error {
	var ra *refusedAddr
	if errors.As(err, &ra) {
		return ra
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errors.New("no answer in time")
	}
	return err
}
