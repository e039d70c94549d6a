package store

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/irisgate/irisgate/core"
)

// The outbox half of the commit path, as the group commit runs it: a
// transaction of 64 durable events (a person's message, agent.busy,
// agent.idle). core-json is what it was before records (json.Marshal of
// core.Event into the same INSERT), for a ratio measured in one run;
// through-Tx is record through the store.Tx interface (Store.Write), as
// the gateway runs it: what the seam's dynamic dispatch costs.
func BenchmarkAppendEvents(b *testing.B) {
	lane := core.Lane{ChatID: "chan_1"}
	evs := []*core.Event{
		{Type: core.EvMessage, Lane: lane, TS: 1700000000000, Message: &core.Message{ID: "m_0123456789abcdef", Lane: lane, Role: core.RoleUser, Text: "what's the weather like tomorrow?", TS: 1700000000000}},
		{Type: core.EvAgentBusy, Lane: lane, TS: 1700000000001, Reason: "processing"},
		{Type: core.EvAgentIdle, Lane: lane, TS: 1700000000002},
	}
	const batch = 64
	for _, c := range []struct {
		name   string
		append func(tx *sqliteTx, ev *core.Event) error
		viaTx  bool
	}{
		{name: "through-Tx", viaTx: true},
		{name: "record", append: func(tx *sqliteTx, ev *core.Event) error { _, _, err := tx.AppendEvent(ev); return err }},
		{name: "core-json", append: func(tx *sqliteTx, ev *core.Event) error {
			body, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			r := outboxRow(ev)
			_, err = tx.exec(`INSERT INTO outbox (type, chat_id, thread_id, message_id, body, ts) VALUES (?,?,?,?,?,?)`,
				r.Type, r.ChatID, r.ThreadID, r.MessageID, body, ev.TS)
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "b.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if c.viaTx {
					err = s.Write(ctx, func(tx Tx) error {
						for i := range batch {
							if _, _, err := tx.AppendEvent(evs[i%len(evs)]); err != nil {
								return err
							}
						}
						return nil
					})
				} else {
					err = s.write(ctx, func(tx *sqliteTx) error {
						for i := range batch {
							if err := c.append(tx, evs[i%len(evs)]); err != nil {
								return err
							}
						}
						return nil
					})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/event")
		})
	}
}
