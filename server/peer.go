package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Where a request comes from, and whether a browser sent it from one of
// our own pages. The network address proves nothing by itself: a reverse
// proxy on the same host makes every visitor loopback. Only a peer listed
// in Config.TrustedProxies is believed when it names the client
// (X-Forwarded-For, Forwarded, X-Real-IP) or the public host
// (X-Forwarded-Host, Forwarded host=).

// ParseTrustedProxies reads a --trusted-proxies list: CIDRs
// ("10.0.0.0/8") or single addresses ("127.0.0.1").
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q is neither an address nor a CIDR", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

func (s *Server) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func parseAddr(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if h, _, err := net.SplitHostPort(s); err == nil {
		s = h
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	return a.Unmap(), err == nil
}

// fromProxy reports whether r was sent by a trusted proxy.
func (s *Server) fromProxy(r *http.Request) bool {
	a, ok := parseAddr(r.RemoteAddr)
	return ok && s.trusted(a)
}

// clientAddr is the address failures are counted by and logs name: the
// socket's peer, unless that is a trusted proxy, in which case the
// nearest address its forwarding headers name that is not itself a
// trusted proxy (walking X-Forwarded-For from the right: the entries on
// its left were written by whoever sent them and prove nothing).
func (s *Server) clientAddr(r *http.Request) string {
	peer := remoteHost(r.RemoteAddr)
	if !s.fromProxy(r) {
		s.warnUntrustedProxy(r)
		return peer
	}
	var chain []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		chain = append(chain, strings.Split(v, ",")...)
	}
	if len(chain) == 0 {
		for _, v := range r.Header.Values("Forwarded") {
			for _, elem := range strings.Split(v, ",") {
				if f, ok := forwardedParam(elem, "for"); ok {
					chain = append(chain, f)
				}
			}
		}
	}
	if len(chain) == 0 {
		if v := r.Header.Get("X-Real-Ip"); v != "" {
			chain = []string{v}
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		a, ok := parseAddr(chain[i])
		if !ok {
			// "unknown" or an obfuscated name: the proxy does not know
			// either; the proxy is the best that can be said.
			return peer
		}
		if !s.trusted(a) || i == 0 {
			return a.String()
		}
	}
	return peer
}

// forwardedParam reads one parameter of an RFC 7239 Forwarded element.
func forwardedParam(elem, name string) (string, bool) {
	for _, pair := range strings.Split(elem, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok && strings.EqualFold(k, name) {
			return strings.Trim(v, `"`), true
		}
	}
	return "", false
}

// publicHost is the host the client asked for: the request's Host, or,
// from a trusted proxy, the host it says it was asked for.
func (s *Server) publicHost(r *http.Request) string {
	if s.fromProxy(r) {
		if h := r.Header.Get("X-Forwarded-Host"); h != "" {
			return strings.TrimSpace(strings.Split(h, ",")[0])
		}
		if v := r.Header.Get("Forwarded"); v != "" {
			if h, ok := forwardedParam(strings.Split(v, ",")[0], "host"); ok {
				return h
			}
		}
	}
	return r.Host
}

// sameOrigin reports whether a browser sent r from one of our own pages,
// or r does not come from a browser at all. Browsers say where a request
// comes from (Sec-Fetch-Site, Origin) and scripts cannot forge either;
// programs that are not browsers send neither. The check is the one
// net/http's CrossOriginProtection makes, applied to WebSocket upgrades
// too, with the public host learnt from a trusted proxy and the origins
// of --allowed-origins admitted.
func (s *Server) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	for _, o := range s.cfg.AllowedOrigins {
		if origin != "" && strings.EqualFold(strings.TrimRight(o, "/"), origin) {
			return true
		}
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default: // cross-site, same-site (another port or subdomain)
		return false
	}
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, s.publicHost(r))
}

// sameOriginWrites refuses every request that can change something (any
// method but GET, HEAD and OPTIONS) that a browser sent from another
// site's page, whichever endpoint it is for: an endpoint added later is
// covered without having to remember. WebSocket upgrades are GETs and are
// checked by handleWS.
func (s *Server) sameOriginWrites(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if !s.sameOrigin(r) {
				writeError(w, ErrCrossOrigin.New())
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// warnUntrustedProxy tells the operator, now and then, that a reverse
// proxy on this machine forwards clients without being trusted: every
// client then has the proxy's address and they all share its bounds.
func (s *Server) warnUntrustedProxy(r *http.Request) {
	a, ok := parseAddr(r.RemoteAddr)
	if !ok || !a.IsLoopback() {
		return
	}
	if r.Header.Get("X-Forwarded-For") == "" && r.Header.Get("Forwarded") == "" && r.Header.Get("X-Real-Ip") == "" {
		return
	}
	s.mu.Lock()
	now := time.Now()
	warn := now.Sub(s.pre.warnedProxy) > untrustedProxyWarnEvery
	if warn {
		s.pre.warnedProxy = now
	}
	s.mu.Unlock()
	if warn {
		s.log.Warn("a reverse proxy on this machine names its clients, but is not in --trusted-proxies: every client has its address, "+
			"and all of them share one address's bounds on connections and failed logins. Add --trusted-proxies "+a.String(),
			"peer", a.String())
	}
}

// untrustedProxyWarnEvery spaces the warnings of warnUntrustedProxy.
const untrustedProxyWarnEvery = 10 * time.Minute
