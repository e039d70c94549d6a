package turn

import (
	"fmt"
	"testing"
	"time"
)

// What is remembered for receipts is bounded: a full map takes no more
// until an entry is older than it is kept for, which then makes room.
func TestRemembersBounded(t *testing.T) {
	m := map[string]awaited{}
	now := time.Now()
	for i := range maxAwaited {
		putBounded(m, fmt.Sprint("m", i), awaited{since: now}, time.Minute)
	}
	putBounded(m, "one more", awaited{since: now}, time.Minute)
	if len(m) != maxAwaited {
		t.Fatalf("%d remembered, want the bound %d", len(m), maxAwaited)
	}
	if _, ok := m["one more"]; ok {
		t.Fatal("a full map took another entry")
	}
	m["m0"] = awaited{since: now.Add(-2 * time.Minute)}
	putBounded(m, "one more", awaited{since: now}, time.Minute)
	if _, ok := m["m0"]; ok {
		t.Fatal("the entry older than it is kept for stayed")
	}
	if _, ok := m["one more"]; !ok || len(m) != maxAwaited {
		t.Fatalf("after the old entry went: %d remembered, the new one %v", len(m), ok)
	}
}
