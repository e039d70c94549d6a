package postgres

import (
	"bytes"
	"sync"
	"testing"

	"github.com/irisgate/irisgate/internal/pgtest"
)

// Replicas asking for the fleet key together, each on its own pool, all
// get one key; asked again, it is the same; another database has another.
func TestFleetKeyOnce(t *testing.T) {
	dsn := pgtest.DB(t)
	const n = 4
	stores := make([]*Store, n)
	for i := range stores {
		s, err := Open(bg, dsn, WithLog(quiet))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	keys := make([][]byte, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			keys[i], errs[i] = stores[i].FleetKey(bg)
		}()
	}
	close(start)
	wg.Wait()
	for i := range keys {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if len(keys[i]) != FleetKeySize || !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("replica %d has key %x, replica 0 %x", i, keys[i], keys[0])
		}
	}
	if bytes.Equal(keys[0], make([]byte, FleetKeySize)) {
		t.Fatal("the key is all zeros")
	}
	var rows int
	if err := stores[0].pool.QueryRow(bg, `SELECT count(*) FROM fleet_key`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("%d rows, %v", rows, err)
	}
	if again, err := stores[1].FleetKey(bg); err != nil || !bytes.Equal(again, keys[0]) {
		t.Fatalf("asked again: %x, %v", again, err)
	}
	other, err := open(t).FleetKey(bg)
	if err != nil || bytes.Equal(other, keys[0]) {
		t.Fatalf("another database's key %x, %v", other, err)
	}
}
