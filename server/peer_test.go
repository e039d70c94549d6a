package server

import (
	"net/http"
	"net/netip"
	"testing"
)

func proxyServer(t testing.TB, trusted ...string) *Server {
	p, err := ParseTrustedProxies(trusted)
	if err != nil {
		t.Fatal(err)
	}
	return &Server{cfg: Config{TrustedProxies: p}}
}

func TestClientAddr(t *testing.T) {
	s := proxyServer(t, "127.0.0.1", "10.0.0.0/8")
	for _, tc := range []struct {
		remote string
		hdr    map[string]string
		want   string
	}{
		{"203.0.113.5:4000", map[string]string{"X-Forwarded-For": "1.2.3.4"}, "203.0.113.5"}, // not a proxy: ignored
		{"127.0.0.1:4000", nil, "127.0.0.1"},
		{"127.0.0.1:4000", map[string]string{"X-Forwarded-For": "198.51.100.1"}, "198.51.100.1"},
		// The client wrote the left entries itself: the nearest untrusted one counts.
		{"127.0.0.1:4000", map[string]string{"X-Forwarded-For": "6.6.6.6, 198.51.100.1, 10.1.2.3"}, "198.51.100.1"},
		{"127.0.0.1:4000", map[string]string{"X-Forwarded-For": "10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"127.0.0.1:4000", map[string]string{"Forwarded": `for="[2001:db8::1]:443";proto=https, for=10.0.0.9`}, "2001:db8::1"},
		{"127.0.0.1:4000", map[string]string{"X-Real-Ip": "198.51.100.2"}, "198.51.100.2"},
		{"127.0.0.1:4000", map[string]string{"X-Forwarded-For": "unknown"}, "127.0.0.1"},
		{"[::ffff:127.0.0.1]:4000", map[string]string{"X-Forwarded-For": "198.51.100.3"}, "198.51.100.3"},
	} {
		r := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
		for k, v := range tc.hdr {
			r.Header.Set(k, v)
		}
		if got := s.clientAddr(r); got != tc.want {
			t.Errorf("%s %v: %s, want %s", tc.remote, tc.hdr, got, tc.want)
		}
	}
	if _, err := ParseTrustedProxies([]string{"not-an-ip"}); err == nil {
		t.Fatal("a bad proxy entry was accepted")
	}
}

// FuzzClientAddr: whatever the headers, the address is the peer's or one
// a header named, never a crash.
func FuzzClientAddr(f *testing.F) {
	f.Add("127.0.0.1:1", "1.2.3.4, 10.0.0.1", `for=1.2.3.4;host=x`, "5.6.7.8")
	f.Add("[::1]:1", ",,,", `for="[::1"`, "")
	s := proxyServer(f, "127.0.0.0/8", "::1", "10.0.0.0/8")
	f.Fuzz(func(t *testing.T, remote, xff, fwd, real string) {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{}, Host: "h"}
		r.Header.Set("X-Forwarded-For", xff)
		r.Header.Set("Forwarded", fwd)
		r.Header.Set("X-Real-Ip", real)
		got := s.clientAddr(r)
		if _, err := netip.ParseAddr(got); err != nil && got != remoteHost(remote) {
			t.Fatalf("%q from %q %q %q %q", got, remote, xff, fwd, real)
		}
		s.publicHost(r)
		s.sameOrigin(r)
	})
}
