package postgres

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/store"
	"github.com/irisgate/irisgate/store/record"
)

// sendBatch is what the gateway commits for one message.send: the message
// (its history row and, finished, its search entry), its turn row and its
// outbox frame. n is a counter for unique ids.
func sendBatch(n int64) (core.Message, *core.Event) {
	lane := core.Lane{ChatID: "chan_1"}
	m := core.Message{ID: fmt.Sprintf("m_%016x", n), Lane: lane, Role: core.RoleUser, TS: 1_700_000_000_000 + n,
		Text: "what's the weather like tomorrow in Zürich? and remind me to book the train"}
	return m, &core.Event{Type: core.EvMessage, Lane: lane, TS: m.TS, Message: &m}
}

// ratios logs each result against the first one.
func ratios(b *testing.B, unit string, names []string, res map[string]float64) {
	if len(names) == 0 || res[names[0]] == 0 {
		return
	}
	var lines []string
	for _, n := range names {
		lines = append(lines, fmt.Sprintf("%-32s %10.0f %s  %5.2fx %s", n, res[n], unit, res[n]/res[names[0]], names[0]))
	}
	b.Logf("in this run:\n%s", strings.Join(lines, "\n"))
}

// BenchmarkCommit is the durable commit rate of the message.send batch on
// SQLite (as the gateway opens it: WAL, synchronous=NORMAL) and on
// PostgreSQL (its defaults: every commit flushed before it returns; and
// with synchronous_commit=off, SQLite's durability: a power cut may lose
// the last commits, never corrupt), in one run, one message per commit
// (a quiet gateway) and 64 (the group commit under load). The ratios are
// logged at the end (-v).
//
//	go test -run '^$' -bench Commit -benchtime 2s -v ./store/postgres/
func BenchmarkCommit(b *testing.B) {
	srv := pgtest.SharedDurable(b)
	type committer struct {
		name  string
		write func(batch int, next func() (core.Message, *core.Event)) error
	}
	pg := func(dsn string) committer {
		s, err := Open(bg, dsn, WithLog(quiet))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return committer{write: func(batch int, next func() (core.Message, *core.Event)) error {
			return s.Write(bg, func(tx store.Tx) error {
				for range batch {
					m, ev := next()
					if err := tx.InsertMessage(m, false); err != nil {
						return err
					}
					if err := tx.QueueTurn(m.Lane, m.ID); err != nil {
						return err
					}
					if _, _, err := tx.AppendEvent(ev); err != nil {
						return err
					}
				}
				return nil
			})
		}}
	}
	lite, err := store.Open(filepath.Join(b.TempDir(), "b.db"), store.WithLog(quiet))
	if err != nil {
		b.Fatal(err)
	}
	defer lite.Close()
	sqlite := committer{name: "sqlite", write: func(batch int, next func() (core.Message, *core.Event)) error {
		return lite.Write(bg, func(tx store.Tx) error {
			for range batch {
				m, ev := next()
				if err := tx.InsertMessage(m, false); err != nil {
					return err
				}
				if err := tx.QueueTurn(m.Lane, m.ID); err != nil {
					return err
				}
				if _, _, err := tx.AppendEvent(ev); err != nil {
					return err
				}
			}
			return nil
		})
	}}
	durable := pg(srv.DB(b))
	durable.name = "postgres"
	async := pg(srv.DB(b) + "&synchronous_commit=off")
	async.name = "postgres-async"
	var n atomic.Int64
	next := func() (core.Message, *core.Event) { return sendBatch(n.Add(1)) }
	res := map[string]float64{}
	var names []string
	for _, batch := range []int{1, 64} {
		for _, c := range []committer{sqlite, durable, async} {
			name := fmt.Sprintf("%s/batch=%d", c.name, batch)
			names = append(names, name)
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					if err := c.write(batch, next); err != nil {
						b.Fatal(err)
					}
				}
				msgs := float64(b.N*batch) / b.Elapsed().Seconds()
				b.ReportMetric(msgs, "msgs/s")
				res[name] = msgs
			})
		}
	}
	ratios(b, "msgs/s", names, res)
}

// BenchmarkCursor is what the outbox cursor's order costs: frames appended
// through outbox_head (AppendEvent) against the same rows numbered by a
// sequence (which lets a later cursor become visible before an earlier
// one: TestOutboxLaterWriterWaitsForEarlier), on the durable server, with
// one writer and with four at once (replicas), 1 and 16 frames per
// transaction. ns/frame is wall time over frames committed by all writers.
//
//	go test -run '^$' -bench Cursor -benchtime 2s -v ./store/postgres/
func BenchmarkCursor(b *testing.B) {
	s, err := Open(bg, pgtest.SharedDurable(b).DB(b), WithLog(quiet), WithMaxConns(8))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rawExec(b, s, `CREATE TABLE seq_outbox (LIKE outbox INCLUDING ALL)`)
	rawExec(b, s, `ALTER TABLE seq_outbox ALTER cursor ADD GENERATED ALWAYS AS IDENTITY`)
	ev := &core.Event{Type: core.EvAgentBusy, Lane: core.Lane{ChatID: "chan_1"}, TS: 1_700_000_000_000, Reason: "processing"}
	body, _ := record.EncodeEvent(ev)
	r := store.OutboxRowOf(ev)
	appends := map[string]func(tx store.Tx) error{
		"outbox_head": func(tx store.Tx) error { _, _, err := tx.AppendEvent(ev); return err },
		"sequence": func(tx store.Tx) error {
			_, err := tx.(*Tx).exec(`INSERT INTO seq_outbox (type, chat_id, thread_id, message_id, body, ts) VALUES ($1,$2,$3,$4,$5,$6)`,
				r.Type, r.ChatID, r.ThreadID, r.MessageID, body, ev.TS)
			return err
		},
	}
	res := map[string]float64{}
	var names []string
	for _, writers := range []int{1, 4} {
		for _, frames := range []int{1, 16} {
			for _, kind := range []string{"sequence", "outbox_head"} {
				name := fmt.Sprintf("%s/writers=%d/frames=%d", kind, writers, frames)
				names = append(names, name)
				app := appends[kind]
				commit := func() error {
					return s.Write(bg, func(tx store.Tx) error {
						for range frames {
							if err := app(tx); err != nil {
								return err
							}
						}
						return nil
					})
				}
				b.Run(name, func(b *testing.B) {
					if writers == 1 {
						for b.Loop() {
							if err := commit(); err != nil {
								b.Fatal(err)
							}
						}
					} else {
						b.SetParallelism((writers + 1) / 2) // GOMAXPROCS 2 here: 4 goroutines
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								if err := commit(); err != nil {
									b.Error(err)
									return
								}
							}
						})
					}
					ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N*frames)
					b.ReportMetric(ns, "ns/frame")
					res[name] = ns
				})
			}
		}
	}
	// Each outbox_head result against the sequence with the same writers
	// and frames.
	sort.Strings(names)
	var lines []string
	for _, n := range names {
		if rest, ok := strings.CutPrefix(n, "outbox_head/"); ok {
			base := res["sequence/"+rest]
			if base > 0 {
				lines = append(lines, fmt.Sprintf("%-24s outbox_head %8.0f ns/frame, sequence %8.0f: %.2fx", rest, res[n], base, res[n]/base))
			}
		}
	}
	b.Logf("in this run:\n%s", strings.Join(lines, "\n"))
}
