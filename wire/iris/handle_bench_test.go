package iris

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/hub"
	"github.com/irisgate/irisgate/store"
)

// BenchmarkHandle is the dialect's share of one request: Session.Handle
// decoding the envelope and the payload, choosing the handler and queueing
// the answer, on a real session (gateway, SQLite store, hub). The requests
// are ones the gateway answers without a store write, so what is measured
// is the request path of this package, not SQLite (history-10 reads the
// store's cached page of the lane).
//
//	go test -run x -bench Handle -count 6 ./wire/iris
func BenchmarkHandle(b *testing.B) {
	env := newDispatchGW(b, b.TempDir())
	defer env.close()
	ctx := context.Background()
	hello := []byte(`{"v":1,"id":1,"type":"hello","payload":{"token":"` + fuzzToken + `","device_id":"bench-dev","device_name":"bench"}}`)
	sess, err := Open(ctx, Config{GW: env.gw, Auth: env.auth, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, "bench", hello)
	if err != nil {
		b.Fatalf("opening a session: %v", err)
	}
	conn := sess.Conn()
	defer func() {
		sess.Close()
		env.gw.Disconnect(conn)
		conn.Close(errors.New("benchmark done"))
	}()
	buf := make([]hub.Out, 0, 64)
	drain := func() {
		dctx, cancel := context.WithCancel(ctx)
		cancel() // take what is queued, without waiting
		buf, _ = conn.Take(dctx, buf[:0])
	}
	drain()
	// Twelve messages in the default lane, as irisgate bench's round
	// trips have: history-10 reads the newest ten.
	if err := env.st.Write(ctx, func(tx store.Tx) error {
		for i := range 12 {
			m := core.Message{ID: fmt.Sprintf("msg_bench_%02d", i), Lane: core.Lane{ChatID: core.DefaultChatID},
				Role: core.RoleUser, Text: strings.Repeat("pub ", 30), TS: int64(1733050000000 + i)}
			if err := tx.InsertMessage(m, false); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, frame string }{
		{"history-10", `{"v":1,"id":7,"type":"history","payload":{"limit":10}}`},
		{"ping", `{"v":1,"id":7,"type":"ping","payload":{"ts":1733050000000}}`},
		{"commands.complete", `{"v":1,"id":7,"type":"commands.complete","payload":{"prefix":"/mo"}}`},
		{"channel.icon-refused", `{"v":1,"id":7,"type":"channel.icon","chat_id":"default","payload":{"icon":5,"color":"#ff0000"}}`},
		{"channel.rename-no-chat", `{"v":1,"id":7,"type":"channel.rename","payload":{"name":"Kitchen"}}`},
		{"malformed-payload", `{"v":1,"id":7,"type":"ping","payload":{"ts":"soon"}}`},
		{"unknown-type", `{"v":1,"id":7,"type":"future.thing","payload":{"a":1}}`},
	} {
		frame := []byte(c.frame)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if _, err := sess.Handle(ctx, frame); err != nil {
					b.Fatal(err)
				}
				if n++; n%32 == 0 {
					drain()
				}
			}
			drain()
		})
	}
}
