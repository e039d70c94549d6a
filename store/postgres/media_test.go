package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

// refs reads a blob's use count (-1: no row).
func refs(t *testing.T, s *Store, sha string) int {
	t.Helper()
	n := -1
	s.pool.QueryRow(bg, `SELECT refs FROM blobs WHERE sha256 = $1`, sha).Scan(&n)
	return n
}

func TestBlobCounting(t *testing.T) {
	s := open(t)
	chat := core.Lane{ChatID: "chan_x"}
	thread := core.Lane{ChatID: "chan_x", ThreadID: "t_x"}
	m := core.Media{Kind: "image", Mime: "image/png", Size: 3, Filename: "a.png", SHA256: "aaaa"}
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutChannel(core.Channel{ChatID: "chan_x", Name: "X", Kind: core.KindChannel}); err != nil {
			return err
		}
		if err := tx.PutChannel(core.Channel{ChatID: "t_x", Name: "T", Kind: core.KindThread, ParentChatID: "chan_x"}); err != nil {
			return err
		}
		if err := tx.PutBlob("aaaa", 3); err != nil {
			return err
		}
		if err := tx.PutBlob("aaaa", 3); err != nil { // known already: nothing happens
			return err
		}
		for i, ref := range []string{"r1", "r2", "r3"} {
			if err := tx.PutUpload("phone", ref, m); err != nil {
				return err
			}
			lane := chat
			if i == 2 {
				lane = thread
			}
			if err := tx.InsertMessage(core.Message{ID: fmt.Sprint("m", i), Lane: lane, Role: core.RoleUser, TS: int64(i)}, false); err != nil {
				return err
			}
		}
		return tx.PutUpload("phone", "r1", m) // replacing a ref does not count twice
	})
	if n := refs(t, s, "aaaa"); n != 3 {
		t.Fatalf("refs = %d after three uploads", n)
	}
	if up, err := s.Upload(bg, "phone", "r2"); err != nil || up.SHA256 != "aaaa" || up.Filename != "a.png" {
		t.Fatalf("upload %+v, %v", up, err)
	}
	var attached core.Media
	write(t, s, func(tx store.Tx) error {
		for i, ref := range []string{"r1", "r2", "r3"} {
			lane := chat
			if i == 2 {
				lane = thread
			}
			md, err := tx.AttachUpload("phone", ref, lane, fmt.Sprint("m", i))
			if err != nil {
				return err
			}
			if md.SHA256 != "aaaa" || md.MessageID != "" || md.ID == "" {
				return fmt.Errorf("attached %+v", md)
			}
			attached = md
		}
		if _, err := tx.AttachUpload("phone", "r1", chat, "m0"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("a used ref: %v", err)
		}
		if _, err := tx.AttachUpload("tablet", "r2", chat, "m0"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("another device's ref: %v", err)
		}
		ok, err := tx.InsertMedia(core.Media{ID: "md_gone", SHA256: "aaaa", MessageID: "m_nope"}, chat)
		if ok || err != nil {
			return fmt.Errorf("media for a missing message: %v %v", ok, err)
		}
		return nil
	})
	if n := refs(t, s, "aaaa"); n != 3 {
		t.Fatalf("refs = %d after attaching: moving a use must not change the count", n)
	}
	if md, err := s.Media(bg, attached.ID); err != nil || md.MessageID != "m2" || md.SHA256 != "aaaa" {
		t.Fatalf("media %+v, %v", md, err)
	}
	if _, err := s.Upload(bg, "phone", "r2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a used upload: %v", err)
	}
	write(t, s, func(tx store.Tx) error { return tx.DeleteMessages(chat, []string{"m0"}) })
	if n := refs(t, s, "aaaa"); n != 2 {
		t.Fatalf("refs = %d after deleting one message", n)
	}
	if u, _ := s.UnusedBlobs(bg, 10); len(u) != 0 {
		t.Fatalf("unused %v while used", u)
	}
	if gone, err := s.ForgetBlob(bg, "aaaa"); gone || err != nil {
		t.Fatalf("forgot a used blob: %v %v", gone, err)
	}
	write(t, s, func(tx store.Tx) error { _, err := tx.DeleteChannel("chan_x"); return err })
	if u, _ := s.UnusedBlobs(bg, 10); len(u) != 1 || u[0] != "aaaa" {
		t.Fatalf("unused %v after the channel went", u)
	}
	if gone, err := s.ForgetBlob(bg, "aaaa"); !gone || err != nil {
		t.Fatalf("forget: %v %v", gone, err)
	}
	if has, _ := s.HasBlob(bg, "aaaa"); has {
		t.Fatal("the blob row stays")
	}
}

func TestExpireUploads(t *testing.T) {
	s := open(t)
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutBlob("bbbb", 1); err != nil {
			return err
		}
		return tx.PutUpload("phone", "r1", core.Media{Kind: "file", Mime: "text/plain", Size: 1, Filename: "a", SHA256: "bbbb"})
	})
	if n, err := s.ExpireUploads(bg, now()-60_000); err != nil || n != 0 {
		t.Fatalf("expired a fresh upload: %d, %v", n, err)
	}
	if n, err := s.ExpireUploads(bg, now()+1); err != nil || n != 1 {
		t.Fatalf("expired %d, %v", n, err)
	}
	if u, _ := s.UnusedBlobs(bg, 10); len(u) != 1 {
		t.Fatalf("the expired upload's blob is not unused: %v", u)
	}
}
