package store

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store/record"
)

// HelloState answers a device never seen from the set of known devices,
// and every way a row comes to be makes its device known: a hello's row
// (in the group commit or not), a proof set, a push registration, a Web
// Push subscription; a store opened again knows the rows it finds. A
// device pruned and back again starts afresh.
func TestHelloStateKnowsEveryDeviceWithARow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	set := []core.CursorRange{{Lo: 2, Hi: 4}}
	state := func(s *Store, id string) (int64, []core.CursorRange) {
		t.Helper()
		last, proven, err := s.HelloState(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return last, proven
	}
	if !s.devs.absent("new") {
		t.Fatal("a device never seen is not answered from the set")
	}
	if last, proven := state(s, "new"); last != 0 || proven != nil {
		t.Fatalf("a device never seen: %d, %v", last, proven)
	}
	writes := map[string]func(id string) error{
		"hello in the commit": func(id string) error {
			return s.Write(ctx, func(tx Tx) error { _, err := tx.SeeDevice(Device{ID: id}); return err })
		},
		"hello with proofs": func(id string) error {
			return s.Write(ctx, func(tx Tx) error { _, _, err := tx.(*sqliteTx).SeeDeviceProofs(Device{ID: id}); return err })
		},
		"hello":  func(id string) error { return s.SeeDevice(ctx, Device{ID: id}) },
		"proofs": func(id string) error { return s.SaveProofs(ctx, id, set) },
		"push":   func(id string) error { return s.SetPushRegistration(ctx, id, "fcm-token", "") },
		"web push": func(id string) error {
			return s.SetWebPush(ctx, id, record.WebPush{Endpoint: "https://push.example/x", Keys: record.WebPushKeys{P256dh: "k", Auth: "a"}})
		},
	}
	var ids []string
	for name, write := range writes {
		id := "dev-" + name
		ids = append(ids, id)
		if err := write(id); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.devs.absent(id) {
			t.Fatalf("%s: the device is not known", name)
		}
		if err := s.SetLastPushed(ctx, id, 9); err != nil {
			t.Fatal(err)
		}
		if last, _ := state(s, id); last != 9 {
			t.Fatalf("%s: last pushed %d, want the row's 9", name, last)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range ids {
		if last, _ := state(s, id); last != 9 {
			t.Fatalf("%s reopened: last pushed %d, want 9", id, last)
		}
	}
	if _, proven := state(s, "dev-proofs"); !slices.Equal(proven, set) {
		t.Fatalf("proofs reopened: %v, want %v", proven, set)
	}
	if err := s.DeleteDevices(ctx, []string{"dev-proofs"}); err != nil {
		t.Fatal(err)
	}
	if !s.devs.absent("dev-proofs") {
		t.Fatal("a pruned device is still known")
	}
	if err := s.SaveProofs(ctx, "dev-proofs", set); err != nil {
		t.Fatal(err)
	}
	if last, proven := state(s, "dev-proofs"); last != 0 || !slices.Equal(proven, set) {
		t.Fatalf("back after pruning: %d, %v; want 0 and %v", last, proven, set)
	}
}

// Past maxKnownDevices the set gives up and the table answers; a store
// beside the gateway (WithoutMigration), which another process writes,
// never answers from it.
func TestKnownDevicesTurnOff(t *testing.T) {
	var k knownDevices
	for i := range maxKnownDevices {
		k.add(strconv.Itoa(i))
	}
	if !k.absent("x") {
		t.Fatal("full but not over: a new id should still be absent")
	}
	k.add("one too many")
	if k.absent("x") || k.ids != nil {
		t.Fatal("over the bound the set still answers (or holds its ids)")
	}
	path := filepath.Join(t.TempDir(), "t.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	beside, err := Open(path, WithoutMigration())
	if err != nil {
		t.Fatal(err)
	}
	defer beside.Close()
	if err := s.SaveProofs(context.Background(), "phone", []core.CursorRange{{Lo: 1, Hi: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, proven, err := beside.HelloState(context.Background(), "phone"); err != nil || len(proven) != 1 {
		t.Fatalf("beside the gateway: %v, %v; want the row's proofs", proven, err)
	}
}
