package server

import (
	"container/list"
	"sync"
	"time"
)

// A waiting room holds connections nobody has authenticated yet (sockets
// before their hello, TCP connections before their HTTP request), by
// client address key (gateway.AddrKey: an IPv4 address, an IPv6 /64).
// Past a bound, who makes room is decided so that a stranger cannot push
// out the owner:
//
//   - Past the bound of its own address, a newcomer pushes out the oldest
//     connection of that address, but only one that has waited longer than
//     the grace a device needs to say hello (a round trip); if none has,
//     the newcomer is turned away. Each admitted connection so keeps its
//     grace: a flood sharing the owner's address (a reverse proxy not in
//     --trusted-proxies) takes turns with the owner instead of cutting
//     every connection short before its hello can arrive.
//   - Past the bound in all, the address with the most connections waiting
//     makes room, and only while it holds more than its fair share (the
//     bound over the addresses waiting): a flood from many addresses never
//     pushes out an address that holds a few. Addresses that recently said
//     a valid hello are the last to be chosen.
//   - An address that recently said a valid hello is bounded only by the
//     bound in all (it is the owner's, or a proxy's that serves everyone).
//   - A trusted proxy's connections (before their HTTP request) are bounded
//     only in all, and never make room for other addresses.
type room[T comparable] struct {
	items  map[T]*list.Element
	byAddr map[string]*list.List // of *roomEntry, oldest first
	// exempt are the keys that never make room for other addresses
	// (trusted proxies: they carry many clients, and only the bound in
	// all applies to them).
	exempt map[string]bool
}

type roomEntry[T comparable] struct {
	item T
	key  string
	at   time.Time
}

// roomLimits are the bounds a newcomer is admitted under.
type roomLimits struct {
	total   int
	perAddr int // 0: none (a trusted proxy, whose clients are many)
	grace   time.Duration
	spared  func(key string) bool // recently said a valid hello
}

func (r *room[T]) len() int { return len(r.items) }

func (r *room[T]) count(key string) int {
	if l := r.byAddr[key]; l != nil {
		return l.Len()
	}
	return 0
}

// add counts item as waiting from key since at; exempt marks the key's
// connections as a trusted proxy's.
func (r *room[T]) add(item T, key string, at time.Time, exempt bool) {
	if r.items == nil {
		r.items, r.byAddr, r.exempt = map[T]*list.Element{}, map[string]*list.List{}, map[string]bool{}
	}
	if exempt {
		r.exempt[key] = true
	}
	l := r.byAddr[key]
	if l == nil {
		l = list.New()
		r.byAddr[key] = l
	}
	r.items[item] = l.PushBack(&roomEntry[T]{item: item, key: key, at: at})
}

// remove stops counting item; false if it was not counted.
func (r *room[T]) remove(item T) bool {
	e, ok := r.items[item]
	if !ok {
		return false
	}
	delete(r.items, item)
	key := e.Value.(*roomEntry[T]).key
	l := r.byAddr[key]
	l.Remove(e)
	if l.Len() == 0 {
		delete(r.byAddr, key)
		delete(r.exempt, key)
	}
	return true
}

// admit decides how a newcomer from key makes room: evict names a
// connection to close first (ok), or refuse says the newcomer must be
// turned away. Neither: there is room.
func (r *room[T]) admit(key string, now time.Time, lim roomLimits) (evict T, ok, refuse bool) {
	spared := lim.spared != nil && lim.spared(key)
	perAddr := lim.perAddr
	if spared {
		perAddr = lim.total
	}
	if perAddr > 0 && r.count(key) >= perAddr {
		return r.own(key, now, lim.grace)
	}
	if r.len() < lim.total {
		return evict, false, false
	}
	addrs := len(r.byAddr)
	if r.count(key) == 0 {
		addrs++
	}
	fair := lim.total / addrs
	var heavy string
	heavyN, heavySpared := 0, true
	for k, l := range r.byAddr {
		if k == key || l.Len() <= fair || r.exempt[k] {
			continue
		}
		sp := lim.spared != nil && lim.spared(k)
		// The unspared first, then the most waiting, then the one whose
		// oldest has waited longest.
		better := heavy == "" || (heavySpared && !sp)
		if !better && sp == heavySpared {
			better = l.Len() > heavyN || (l.Len() == heavyN &&
				l.Front().Value.(*roomEntry[T]).at.Before(r.byAddr[heavy].Front().Value.(*roomEntry[T]).at))
		}
		if better {
			heavy, heavyN, heavySpared = k, l.Len(), sp
		}
	}
	if heavy != "" && heavyN > r.count(key) {
		e := r.byAddr[heavy].Front().Value.(*roomEntry[T])
		return e.item, true, false
	}
	return r.own(key, now, lim.grace)
}

// own makes room in key's own share: its oldest connection goes if it has
// had its grace, or else the newcomer is refused.
func (r *room[T]) own(key string, now time.Time, grace time.Duration) (evict T, ok, refuse bool) {
	l := r.byAddr[key]
	if l == nil {
		return evict, false, true
	}
	e := l.Front().Value.(*roomEntry[T])
	if now.Sub(e.at) < grace {
		return evict, false, true
	}
	return e.item, true, false
}

// helloMemory remembers the addresses that said a valid hello recently,
// in a bounded map: such an address is spared (see room).
type helloMemory struct {
	mu sync.Mutex
	at map[string]time.Time
}

const (
	// validMemory is how long a valid hello spares its address.
	validMemory = 10 * time.Minute
	// validAddrs bounds the addresses remembered.
	validAddrs = 4096
)

func (h *helloMemory) saw(key string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.at == nil {
		h.at = map[string]time.Time{}
	}
	if _, ok := h.at[key]; !ok && len(h.at) >= validAddrs {
		var oldest string
		for k, t := range h.at {
			if now.Sub(t) > validMemory {
				delete(h.at, k)
			} else if oldest == "" || t.Before(h.at[oldest]) {
				oldest = k
			}
		}
		if len(h.at) >= validAddrs {
			delete(h.at, oldest)
		}
	}
	h.at[key] = now
}

func (h *helloMemory) recent(key string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.at[key]
	return ok && now.Sub(t) <= validMemory
}
