package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/store"
)

var mediaTests = []test{
	{"MediaBlobsCountTheirUses", testBlobUses},
	{"MediaUploadsAttachOnce", testUploads},
}

// A blob is unused exactly when no upload and no message's file uses it:
// then, and only then, it may be forgotten (and its file removed). Every
// way a message goes (a delete, its channel's delete) releases its files.
func testBlobUses(t *testing.T, s Store) {
	chat := core.Lane{ChatID: "chan_x"}
	thread := core.Lane{ChatID: "chan_x", ThreadID: "t_x"}
	m := core.Media{Kind: "image", Mime: "image/png", Size: 3, Filename: "a.png", SHA256: "aaaa"}
	unused := func(want ...string) {
		t.Helper()
		u, err := s.UnusedBlobs(bg, 10)
		if err != nil || !slices.Equal(u, want) {
			t.Fatalf("unused blobs %v, %v; want %v", u, err, want)
		}
	}
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutChannel(core.Channel{ChatID: "chan_x", Name: "X", Kind: core.KindChannel}); err != nil {
			return err
		}
		if err := tx.PutChannel(core.Channel{ChatID: "t_x", Name: "T", Kind: core.KindThread, ParentChatID: "chan_x"}); err != nil {
			return err
		}
		return tx.PutBlob("aaaa", 3)
	})
	unused("aaaa") // put before the row that uses it commits: unused until then
	if has, err := s.HasBlob(bg, "aaaa"); !has || err != nil {
		t.Fatalf("has the blob: %v, %v", has, err)
	}
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutBlob("aaaa", 3); err != nil { // known already: nothing changes
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
		return tx.PutUpload("phone", "r1", m) // replacing a ref
	})
	unused()
	var ids []string
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
			ids = append(ids, md.ID)
		}
		return nil
	})
	if ok, err := s.ForgetBlob(bg, "aaaa"); ok || err != nil {
		t.Fatalf("forgot a blob in use: %v, %v", ok, err)
	}
	write(t, s, func(tx store.Tx) error { return tx.DeleteMessages(chat, []string{"m0"}) })
	unused()
	if _, err := s.Media(bg, ids[0]); !notFound(err) {
		t.Fatalf("the deleted message's file: %v", err)
	}
	if got, err := s.Media(bg, ids[1]); err != nil || got.SHA256 != "aaaa" || got.MessageID != "m1" || got.Filename != "a.png" {
		t.Fatalf("a kept message's file: %+v, %v", got, err)
	}
	write(t, s, func(tx store.Tx) error { _, err := tx.DeleteChannel("chan_x"); return err })
	unused("aaaa")
	if ok, err := s.ForgetBlob(bg, "aaaa"); !ok || err != nil {
		t.Fatalf("forget: %v, %v", ok, err)
	}
	if has, _ := s.HasBlob(bg, "aaaa"); has {
		t.Fatal("the blob row stays")
	}
	unused()
}

// An acknowledged upload is its device's, attaches to one message once,
// and expires unused; a file given to a message that is gone is refused.
func testUploads(t *testing.T, s Store) {
	lane := core.Lane{ChatID: core.DefaultChatID}
	m := core.Media{Kind: "document", Mime: "application/pdf", Size: 9, Filename: "doc.pdf", SHA256: "bbbb"}
	write(t, s, func(tx store.Tx) error {
		if err := tx.PutBlob(m.SHA256, m.Size); err != nil {
			return err
		}
		if err := tx.PutUpload("phone", "ref1", m); err != nil {
			return err
		}
		if err := tx.PutUpload("phone", "old", m); err != nil {
			return err
		}
		return tx.InsertMessage(userMsg(lane, "m1", "", 1), false)
	})
	if got, err := s.Upload(bg, "phone", "ref1"); err != nil || got != m {
		t.Fatalf("upload %+v, %v; want %+v", got, err, m)
	}
	if _, err := s.Upload(bg, "tablet", "ref1"); !notFound(err) {
		t.Fatalf("another device's upload: %v", err)
	}
	var md core.Media
	write(t, s, func(tx store.Tx) error {
		if _, err := tx.AttachUpload("tablet", "ref1", lane, "m1"); !notFound(err) {
			return fmt.Errorf("attached another device's upload: %v", err)
		}
		var err error
		if md, err = tx.AttachUpload("phone", "ref1", lane, "m1"); err != nil {
			return err
		}
		if _, err := tx.AttachUpload("phone", "ref1", lane, "m1"); !notFound(err) {
			return fmt.Errorf("attached a used upload: %v", err)
		}
		ok, err := tx.InsertMedia(core.Media{ID: "md_gone", SHA256: m.SHA256, MessageID: "m_nope"}, lane)
		if ok || err != nil {
			return fmt.Errorf("a file for a missing message: %v, %v", ok, err)
		}
		ok, err = tx.InsertMedia(core.Media{ID: "md_sent", Kind: "image", Mime: "image/png", Size: 9, Filename: "x.png", SHA256: m.SHA256, MessageID: "m1"}, lane)
		if !ok || err != nil {
			return fmt.Errorf("a file for a message: %v, %v", ok, err)
		}
		return nil
	})
	want := m
	want.ID = md.ID
	if md != want || md.ID == "" {
		t.Fatalf("attached %+v, want %+v with a fresh id (and no message id)", md, want)
	}
	want.MessageID = "m1"
	if got, err := s.Media(bg, md.ID); err != nil || got != want {
		t.Fatalf("media %+v, %v; want %+v", got, err, want)
	}
	if _, err := s.Media(bg, "md_gone"); !notFound(err) {
		t.Fatalf("the refused file: %v", err)
	}
	if got, err := s.Media(bg, "md_sent"); err != nil || got.MessageID != "m1" || got.Filename != "x.png" {
		t.Fatalf("the agent's file: %+v, %v", got, err)
	}
	if _, err := s.Upload(bg, "phone", "ref1"); !notFound(err) {
		t.Fatalf("a used upload is still there: %v", err)
	}
	n, err := s.ExpireUploads(bg, time.Now().Add(time.Minute).UnixMilli())
	if err != nil || n != 1 {
		t.Fatalf("expired %d, %v; want the unused one", n, err)
	}
	if _, err := s.Upload(bg, "phone", "old"); !notFound(err) {
		t.Fatalf("an expired upload: %v", err)
	}
}
