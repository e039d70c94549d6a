package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// A string PostgreSQL's text cannot hold (a NUL byte, bytes that are not
// UTF-8) matches nothing a read looks for, and a write of it is a clear
// error that leaves the transaction usable: the rest of a group commit's
// batch still goes in.
func TestStringsTextCannotHold(t *testing.T) {
	s := open(t)
	lane := core.Lane{ChatID: core.DefaultChatID}
	for _, bad := range []string{"a\x00b", string([]byte{0xff, 0xfe})} {
		if _, err := s.Message(bg, bad); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Message(%q): %v", bad, err)
		}
		if _, _, err := s.History(bg, core.Lane{ChatID: bad}, "", 10); err != nil {
			t.Errorf("History in lane %q: %v", bad, err)
		}
		if _, _, err := s.History(bg, lane, bad, 10); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("History before %q: %v", bad, err)
		}
		if _, err := s.Channel(bg, bad); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Channel(%q): %v", bad, err)
		}
		if d, err := s.Device(bg, bad); err != nil || d.Name != "" {
			t.Errorf("Device(%q): %+v, %v", bad, d, err)
		}
		if n, err := s.ConversationLen(bg, core.Lane{ChatID: bad}); err != nil || n != 0 {
			t.Errorf("ConversationLen: %d, %v", n, err)
		}
		if ok, err := s.Approved(bg, bad); ok || err != nil {
			t.Errorf("Approved: %v, %v", ok, err)
		}
		if _, err := s.Upload(bg, bad, bad); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Upload: %v", err)
		}
		if err := s.RevokeToken(bg, bad); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RevokeToken: %v", err)
		}
		if ok, err := s.FireCronJob(bg, bad, time.Time{}, time.Time{}, time.Time{}, true); ok || err != nil {
			t.Errorf("FireCronJob: %v, %v", ok, err)
		}
		if _, err := s.SearchPageBefore(bg, "x", nil, bad, 10); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("search before %q: %v", bad, err)
		}
		if err := s.SeeDevice(bg, store.Device{ID: bad}); !errors.Is(err, ErrNotText) {
			t.Errorf("SeeDevice(%q): %v", bad, err)
		}
		write(t, s, func(tx store.Tx) error {
			if err := tx.InsertMessage(core.Message{ID: "m_" + bad, Lane: lane, Role: "user"}, false); !errors.Is(err, ErrNotText) {
				t.Errorf("InsertMessage: %v", err)
			}
			if err := tx.InsertMessage(core.Message{ID: "m1", Lane: lane, Role: "user", Text: bad}, false); !errors.Is(err, ErrNotText) {
				t.Errorf("InsertMessage with text %q: %v", bad, err)
			}
			if _, _, err := tx.AppendEvent(&core.Event{Type: core.EvAgentIdle, Lane: core.Lane{ChatID: bad}}); !errors.Is(err, ErrNotText) {
				t.Errorf("AppendEvent in lane %q: %v", bad, err)
			}
			if _, err := tx.Channel(bad); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("tx.Channel: %v", err)
			}
			if _, err := tx.AttachUpload(bad, "r", lane, "m1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("AttachUpload: %v", err)
			}
			// The transaction is not spoiled.
			if err := tx.InsertMessage(core.Message{ID: "ok_" + core.NewID(""), Lane: lane, Role: "user"}, false); err != nil {
				return err
			}
			_, _, err := tx.AppendEvent(idle(1))
			return err
		})
	}
	// The event's record escapes what its JSON holds: a NUL in a message
	// carried by a frame is stored (the frame's columns are the lane's).
	if c := appendEvent(t, s, &core.Event{Type: core.EvMessage, Lane: lane, Message: &core.Message{ID: "x", Lane: lane, Text: "a\x00b"}}); c == 0 {
		t.Fatal("no cursor")
	}
}
