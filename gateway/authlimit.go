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
	// held counts the delayed answers pending, by address key (an entry
	// only while some are) and in all.
	held    map[string]int
	heldAll int
}

type failWindow struct {
	start time.Time
	n     int
}

func newFailures(lim AuthLimits) *failures {
	return &failures{lim: lim, m: make(map[string]*failWindow), held: make(map[string]int)}
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

// hold counts one more delayed answer pending for addr; false when its
// address, or all, have as many as they may.
func (f *failures) hold(addr string) bool {
	key := AddrKey(addr)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[key] >= f.lim.MaxDelayed || f.heldAll >= f.lim.MaxDelayedAll {
		return false
	}
	f.held[key]++
	f.heldAll++
	return true
}

// unhold ends a delayed answer hold counted.
func (f *failures) unhold(addr string) {
	key := AddrKey(addr)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[key]--; f.held[key] <= 0 {
		delete(f.held, key)
	}
	f.heldAll--
}

// lineBucket is a token bucket of log lines.
type lineBucket struct {
	every time.Duration
	burst int

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	skipped int
}

// take reports whether a line may be logged at now, and how many were
// left out since the last one.
func (b *lineBucket) take(now time.Time) (bool, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(float64(b.burst), b.tokens+float64(now.Sub(b.last))/float64(b.every))
	}
	b.last = now
	if b.tokens < 1 {
		b.skipped++
		return false, 0
	}
	b.tokens--
	n := b.skipped
	b.skipped = 0
	return true, n
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
