package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/irisgate/irisgate/gateway"
)

// The addresses of one IPv6 /64 are one address to the waiting room:
// whoever has one of them has them all. (This machine's loopback has one
// IPv6 address, so the rule is tested here rather than over sockets.)
func TestWaitingRoomCountsAnIPv6Slash64AsOneAddress(t *testing.T) {
	s := &Server{cfg: Config{MaxWaiting: 16, MaxWaitingPerAddr: 4, HelloTimeout: time.Minute, HelloGrace: time.Minute},
		m: gateway.NewMetrics(nil), waiting: map[*helloWait]struct{}{}}
	for i := range 4 {
		if w := s.waitHello(fmt.Sprintf("2001:db8:1:2::%x", i+1)); w.evicted {
			t.Fatalf("connection %d of the /64 turned away", i)
		}
	}
	if w := s.waitHello("2001:db8:1:2:ffff::9"); !w.evicted {
		t.Fatal("a fifth connection of the /64 was let in past the bound of 4")
	}
	if w := s.waitHello("2001:db8:1:3::1"); w.evicted {
		t.Fatal("another /64 was turned away")
	}
	if n := s.pre.room.count("2001:db8:1:2::/64"); n != 4 {
		t.Fatalf("the /64 counts %d waiting, want 4", n)
	}
}
