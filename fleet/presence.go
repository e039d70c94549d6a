package fleet

import (
	"sync"
	"time"
)

// Bounds of what peers may make a replica remember of presence.
const (
	maxPeers       = 64
	maxPeerDevices = 100_000
)

// peers is what the other replicas say is connected to them: a device
// there is not away, so no push goes to it. Each peer's list expires when
// it stops speaking (a replica killed -9), and its summaries replace the
// list, so a lost disconnect is forgotten at the next one.
type peers struct {
	mu  sync.RWMutex
	by  map[string]*peer
	ttl time.Duration
	now func() time.Time
}

type peer struct {
	devs    map[string]struct{}
	expires time.Time
	// The summary being received: generation, parts seen, devices.
	gen   uint64
	parts int
	next  map[string]struct{}
}

func newPeers(ttl time.Duration, now func() time.Time) *peers {
	return &peers{by: map[string]*peer{}, ttl: ttl, now: now}
}

// has reports whether a live peer has deviceID connected.
func (p *peers) has(deviceID string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	now := p.now()
	for _, pr := range p.by {
		if _, ok := pr.devs[deviceID]; ok && now.Before(pr.expires) {
			return true
		}
	}
	return false
}

// peer returns origin's entry, refreshed; nil when there are too many.
func (p *peers) peerLocked(origin string) *peer {
	pr := p.by[origin]
	if pr == nil {
		if len(p.by) >= maxPeers {
			return nil
		}
		pr = &peer{devs: map[string]struct{}{}}
		p.by[origin] = pr
	}
	pr.expires = p.now().Add(p.ttl)
	return pr
}

// apply takes a presence message of origin.
func (p *peers) apply(origin string, m *message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.peerLocked(origin)
	if pr == nil {
		return
	}
	for _, id := range m.Off {
		delete(pr.devs, id)
	}
	for _, id := range m.On {
		if len(pr.devs) < maxPeerDevices {
			pr.devs[id] = struct{}{}
		}
	}
	if m.Parts == 0 {
		return
	}
	if m.Gen != pr.gen || pr.next == nil {
		pr.gen, pr.parts, pr.next = m.Gen, 0, map[string]struct{}{}
	}
	for _, id := range m.All {
		if len(pr.next) < maxPeerDevices {
			pr.next[id] = struct{}{}
		}
	}
	// Parts arrive in order from one publisher; one lost leaves the old
	// list until the next summary.
	if m.Part != pr.parts {
		pr.next, pr.parts = nil, 0
		return
	}
	pr.parts++
	if pr.parts == m.Parts {
		pr.devs, pr.next, pr.parts = pr.next, nil, 0
	}
}

// bye forgets origin at once: it stopped cleanly.
func (p *peers) bye(origin string) {
	p.mu.Lock()
	delete(p.by, origin)
	p.mu.Unlock()
}

// expire forgets the peers that have been silent past their time and
// returns how many devices the rest have connected.
func (p *peers) expire() (devices int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	for o, pr := range p.by {
		if !now.Before(pr.expires) {
			delete(p.by, o)
			continue
		}
		devices += len(pr.devs)
	}
	return devices
}
