package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/irisgate/irisgate/core"
)

// refs reads a blob's use count (-1: no row).
func refs(t *testing.T, s *Store, sha string) int {
	t.Helper()
	n := -1
	s.r.QueryRow(`SELECT refs FROM blobs WHERE sha256 = ?`, sha).Scan(&n)
	return n
}

func TestBlobCounting(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	write := func(fn func(Tx) error) {
		t.Helper()
		if err := s.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	chat := core.Lane{ChatID: "chan_x"}
	thread := core.Lane{ChatID: "chan_x", ThreadID: "t_x"}
	m := core.Media{Kind: "image", Mime: "image/png", Size: 3, Filename: "a.png", SHA256: "aaaa"}
	write(func(tx Tx) error {
		if err := tx.PutChannel(core.Channel{ChatID: "chan_x", Name: "X", Kind: core.KindChannel}); err != nil {
			return err
		}
		if err := tx.PutChannel(core.Channel{ChatID: "t_x", Name: "T", Kind: core.KindThread, ParentChatID: "chan_x"}); err != nil {
			return err
		}
		if err := tx.PutBlob("aaaa", 3); err != nil {
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
	write(func(tx Tx) error {
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
		}
		if _, err := tx.AttachUpload("phone", "r1", chat, "m0"); err != ErrNotFound {
			return fmt.Errorf("a used ref: %v", err)
		}
		if _, err := tx.AttachUpload("tablet", "r2", chat, "m0"); err != ErrNotFound {
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
	write(func(tx Tx) error { return tx.DeleteMessages(chat, []string{"m0"}) })
	if n := refs(t, s, "aaaa"); n != 2 {
		t.Fatalf("refs = %d after deleting one message", n)
	}
	if u, _ := s.UnusedBlobs(ctx, 10); len(u) != 0 {
		t.Fatalf("unused %v while used", u)
	}
	write(func(tx Tx) error { _, err := tx.DeleteChannel("chan_x"); return err })
	if u, _ := s.UnusedBlobs(ctx, 10); len(u) != 1 || u[0] != "aaaa" {
		t.Fatalf("unused %v after the channel went", u)
	}
	if gone, err := s.ForgetBlob(ctx, "aaaa"); !gone || err != nil {
		t.Fatalf("forget: %v %v", gone, err)
	}
	if has, _ := s.HasBlob(ctx, "aaaa"); has {
		t.Fatal("the blob row stays")
	}
}
