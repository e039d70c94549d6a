package gateway

import (
	"net/netip"
	"sync"
	"time"
)

// failures counts failed hellos per client address, in a bounded map.
type failures struct {
	lim AuthLimits

	mu sync.Mutex
	m  map[string]*failWindow
}

type failWindow struct {
	start time.Time
	n     int
}

func newFailures(lim AuthLimits) *failures {
	return &failures{lim: lim, m: make(map[string]*failWindow)}
}

// fail records a failed hello from addr at now. It returns how long the
// answer must wait, the address's failures in its window, whether this
// failure is to be logged (the free ones are; past them only the lock-out
// is, so a flood cannot flood the log too) and whether this failure is
// the one that began the delays.
func (f *failures) fail(addr string, now time.Time) (delay time.Duration, n int, log, lockout bool) {
	key := AddrKey(addr)
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.m[key]
	if w == nil || now.Sub(w.start) > f.lim.Window {
		if w == nil && len(f.m) >= f.lim.MaxAddrs {
			f.evict(now)
		}
		w = &failWindow{start: now}
		f.m[key] = w
	}
	w.n++
	n = w.n
	if n <= f.lim.Free {
		return 0, n, true, false
	}
	delay = f.lim.Delay
	for i := f.lim.Free + 1; i < n && delay < f.lim.MaxDelay; i++ {
		delay *= 2
	}
	return min(delay, f.lim.MaxDelay), n, false, n == f.lim.Free+1
}

// evict makes room for one more address: windows that are over go, and
// if none is, an arbitrary one (Go's map order is random), so a spray of
// addresses can grow the map no further than MaxAddrs.
func (f *failures) evict(now time.Time) {
	for k, w := range f.m {
		if now.Sub(w.start) > f.lim.Window {
			delete(f.m, k)
		}
	}
	for k := range f.m {
		if len(f.m) < f.lim.MaxAddrs {
			return
		}
		delete(f.m, k)
	}
}

// size is the number of addresses remembered (tests).
func (f *failures) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}

// AddrKey is what failures are counted by: an IPv4 address, or an IPv6
// address's /64 (one subscriber's network: whoever has one address of it
// has them all).
func AddrKey(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
