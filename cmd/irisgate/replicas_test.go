package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/internal/pgtest"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/proto/irisv1"
	"github.com/irisgate/irisgate/store/postgres"
)

// fleetToken is the one owner's token every device of the test uses.
const fleetToken = "fleet-test-token-0123456789abcdef0123456789abcdef"

// watched is a device of the owner: every durable frame it receives, per
// connection, in order, as its key (frameKey: Iris's live frames carry no
// cursor, so they are matched to the outbox by what they say).
type watched struct {
	name  string
	mu    sync.Mutex
	conns [][]string
	start int // message.start frames (transient, relayed through NATS)
	more  chan struct{}
	conn  *client.Conn
}

// frameKey names a durable frame by its type, lane and message: what the
// outbox's event at a cursor says (eventKey).
func frameKey(f client.Frame) string {
	var p struct {
		MessageID string `json:"message_id"`
	}
	f.Decode(&p)
	return string(f.Type) + " " + f.ChatID + " " + p.MessageID
}

func eventKey(ev *core.Event) string {
	id := ""
	if ev.Message != nil {
		id = ev.Message.ID
	}
	return string(ev.Type) + " " + ev.Lane.ChatID + " " + id
}

func watch(t *testing.T, name, addr string) *watched {
	w := &watched{name: name, more: make(chan struct{})}
	w.connect(t, addr)
	return w
}

// connect opens a connection to addr and records its frames.
func (w *watched) connect(t *testing.T, addr string) {
	t.Helper()
	c, err := dialToken(t, addr, w.name, fleetToken)
	if err != nil {
		t.Fatalf("%s to %s: %v", w.name, addr, err)
	}
	w.mu.Lock()
	w.conns = append(w.conns, nil)
	i := len(w.conns) - 1
	w.conn = c
	w.mu.Unlock()
	go func() {
		for f := range c.Events() {
			w.mu.Lock()
			if f.Type == irisv1.TypeMessageStart {
				w.start++
			}
			// (A turn tells its sender alone that the message was read:
			// that frame is not in the outbox.)
			if core.EventType(f.Type).Durable() && f.Type != irisv1.TypeReadReceipt {
				w.conns[i] = append(w.conns[i], frameKey(f))
				close(w.more)
				w.more = make(chan struct{})
			}
			w.mu.Unlock()
		}
	}()
}

// has waits until the device has every frame of want (moved: in any order,
// over its connections; else as many as want, in one sequence).
func (w *watched) has(t *testing.T, want []string, moved bool) {
	t.Helper()
	deadline := time.After(testgw.Wait)
	for {
		w.mu.Lock()
		more := w.more
		w.mu.Unlock()
		got := w.all()
		if moved && len(missing(got, want)) == 0 || !moved && len(got) >= len(want) {
			return
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("%s: has %d frames, waited for %d", w.name, len(got), len(want))
		}
	}
}

// all is every durable frame the device received, in order of arrival.
func (w *watched) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, c := range w.conns {
		out = append(out, c...)
	}
	return out
}

// missing is what of want got lacks.
func missing(got, want []string) []string {
	have := map[string]bool{}
	for _, k := range got {
		have[k] = true
	}
	var out []string
	for _, k := range want {
		if !have[k] {
			out = append(out, k)
		}
	}
	return out
}

// fleetRig is three `irisgate serve` replicas on one PostgreSQL server of
// the test's own (it is restarted), a NATS server in the test process,
// and a media directory they share.
type fleetRig struct {
	t     *testing.T
	pg    *pgtest.Server
	url   string
	nats  *natsserver.Server
	port  int
	media string
	procs []*serveProc
	addrs []string
	st    *postgres.Store // the outbox, read as a replica reads it
}

// newFleetRig starts a PostgreSQL server and a NATS server of the test's
// own, the replicas start starts, and waits until they are all on NATS.
func newFleetRig(t *testing.T, start func(*fleetRig)) *fleetRig {
	t.Helper()
	noGateways(t)
	pg, err := pgtest.Start(pgtest.Fast()...)
	if err != nil {
		pgtest.Skip(t, err)
	}
	t.Cleanup(func() { pg.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	_, url, err := pg.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := &fleetRig{t: t, pg: pg, url: url, media: t.TempDir()}
	r.nats = startNATSServer(t, -1)
	r.port = r.nats.Addr().(*net.TCPAddr).Port
	start(r)
	if r.st, err = postgres.Open(ctx, url, postgres.WithoutMigration()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.st.Close() })
	r.waitNATS("1", r.addrs...)
	return r
}

func startNATSServer(t *testing.T, port int) *natsserver.Server {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(testgw.Wait) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

func (r *fleetRig) replica(i int, args ...string) {
	r.t.Helper()
	dir := filepath.Join(r.t.TempDir(), fmt.Sprint("replica", i))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		r.t.Fatal(err)
	}
	env := []string{"IRISGATE_TOKEN=" + fleetToken, "IRISGATE_STORE=" + r.url, "IRISGATE_NATS=" + r.nats.ClientURL(),
		"IRISGATE_MEDIA_DIR=" + r.media}
	p := startServe(r.t, dir, env, append([]string{"--echo-delay", "1ms", "--lease-ttl", "1s"}, args...)...)
	r.procs = append(r.procs, p)
	r.addrs = append(r.addrs, serveAddr(r.t, p))
}

// outbox is every durable frame committed, in cursor order, as keys
// (read again when the test's own connection was broken by a restart).
func (r *fleetRig) outbox() []string {
	r.t.Helper()
	deadline := time.Now().Add(testgw.Wait)
	for {
		keys, err := r.readOutbox()
		if err == nil {
			return keys
		}
		if time.Now().After(deadline) {
			r.t.Fatal(err)
		}
	}
}

func (r *fleetRig) readOutbox() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()
	h, err := r.st.OutboxHead(ctx)
	if err != nil {
		return nil, err
	}
	var keys []string
	next := int64(1)
	err = r.st.ScanEvents(ctx, 0, h, func(ev *core.Event) error {
		if ev.Cursor != next {
			r.t.Fatalf("the outbox has cursor %d after %d", ev.Cursor, next-1)
		}
		next++
		keys = append(keys, eventKey(ev))
		return nil
	})
	return keys, err
}

// quiet waits until the devices have every frame committed so far, and
// returns the outbox.
func (r *fleetRig) quiet(ws []*watched, moved ...*watched) []string {
	r.t.Helper()
	want := r.outbox()
	for _, w := range ws {
		w.has(r.t, want, slices.Contains(moved, w))
	}
	return want
}

// natsConnected reads irisgate_fleet_nats_connected from a replica.
func natsConnected(t *testing.T, addr string) string {
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "irisgate_fleet_nats_connected "); ok {
			return v
		}
	}
	t.Fatalf("%s: no irisgate_fleet_nats_connected in /metrics", addr)
	return ""
}

// waitMetric waits for the replicas' NATS gauge to read want.
func (r *fleetRig) waitNATS(want string, addrs ...string) {
	r.t.Helper()
	deadline := time.Now().Add(testgw.Wait)
	for _, a := range addrs {
		for natsConnected(r.t, a) != want {
			if time.Now().After(deadline) {
				r.t.Fatalf("%s: NATS connected never became %s", a, want)
			}
			time.Sleep(20 * time.Millisecond) // polling a gauge: no event to wait on
		}
	}
}

// send sends n messages through a device, each accepted (retrying while
// the store is away), and reports each accepted one on sent.
func send(t *testing.T, w *watched, n int, tag string, sent chan<- int) error {
	for i := 0; i < n; i++ {
		deadline := time.Now().Add(testgw.Wait)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
			w.mu.Lock()
			c := w.conn
			w.mu.Unlock()
			_, err := c.Request(ctx, irisv1.TypeMessageSend, client.Lane{}, irisv1.MessageSend{Text: fmt.Sprintf("%s %d", tag, i)})
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: sending %s %d: %w", w.name, tag, i, err)
			}
			select {
			case <-c.Done():
				return fmt.Errorf("%s: connection lost: %w", w.name, c.Err())
			case <-time.After(50 * time.Millisecond): // the store is back soon: retry
			}
		}
		if sent != nil {
			sent <- i
		}
	}
	return nil
}

// TestThreeReplicas runs three irisgate replicas as people would (serve
// --store postgres://… --nats nats://… --media-dir …) and devices of one
// owner on each, while all three take messages into one lane (the echo
// agent answers them):
//
//   - every device sees every durable frame once, in cursor order, and the
//     streams' transient frames relayed from the other replicas;
//
//   - one replica killed -9 mid-stream: its devices reconnect to another
//     and sync closes every gap;
//
//   - NATS stopped for a while, messages sent meanwhile: once it is back,
//     every device has everything, in order, without a sync;
//
//   - PostgreSQL restarted: the replicas carry on without a restart.
//
//   - every message is answered once across the fleet: one lane's turns
//     run on the replica holding its lease, and the killed replica's are
//     taken over once its lease (--lease-ttl 1s) expires.
func TestThreeReplicas(t *testing.T) {
	r := newFleetRig(t, func(r *fleetRig) {
		for i := 0; i < 3; i++ {
			r.replica(i)
		}
	})
	pg := r.pg
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()

	// Two devices on each replica: one sends, one only watches.
	var senders, watchers []*watched
	for i, a := range r.addrs {
		senders = append(senders, watch(t, fmt.Sprint("sender-", i), a))
		watchers = append(watchers, watch(t, fmt.Sprint("watcher-", i), a))
	}
	everyone := append(slices.Clone(senders), watchers...)

	// All three take messages at once.
	const perSender = 8
	errs := make(chan error, 3)
	for _, s := range senders {
		go func() { errs <- send(t, s, perSender, "steady", nil) }()
	}
	for range senders {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := r.quiet(everyone)
	r.checkAll(want, everyone)
	for _, w := range everyone {
		w.mu.Lock()
		starts := w.start
		w.mu.Unlock()
		// Each reply's message.start (relayed by the replica running the
		// turn) reaches every device before its message.stop.
		if stops := count(want, "message.stop"); starts < stops {
			t.Errorf("%s saw %d replies start, and %d end (the other replicas' starts are relayed)", w.name, starts, stops)
		}
	}

	// Replica 1 killed -9 while all three take messages.
	sent1 := make(chan int, 64)
	for i, s := range senders {
		go func() {
			var ch chan<- int
			if i == 1 {
				ch = sent1
			}
			errs <- send(t, s, 12, "kill", ch)
		}()
	}
	for i := 0; i < 4; i++ {
		<-sent1
	}
	if err := r.procs[1].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	r.procs[1].cmd.Wait()
	for range senders {
		<-errs // sender 1's ends with its connection
	}
	// Its devices come back on replica 2 and sync from what they have.
	// (Iris devices sync from the cursor of the last sync.done; these
	// never synced, so they sync from 0: what they were proven to have is
	// not replayed.)
	for _, w := range []*watched{senders[1], watchers[1]} {
		from := int64(0)
		w.connect(t, r.addrs[2])
		if _, err := w.conn.Request(ctx, irisv1.TypeSync, client.Lane{}, irisv1.Sync{Cursor: from}); err != nil {
			t.Fatalf("%s: sync: %v", w.name, err)
		}
	}
	if err := send(t, senders[1], 3, "after kill", nil); err != nil {
		t.Fatal(err)
	}
	r.checkAll(r.quiet(everyone, senders[1], watchers[1]), everyone, senders[1], watchers[1])

	// NATS stopped for a while; the two replicas left take messages.
	live := []string{r.addrs[0], r.addrs[2]}
	r.nats.Shutdown()
	r.waitNATS("0", live...)
	for _, s := range []*watched{senders[0], senders[2]} {
		go func() { errs <- send(t, s, 5, "nats down", nil) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	r.nats = startNATSServer(t, r.port)
	r.waitNATS("1", live...)
	// No sync: the replicas read what they missed.
	r.checkAll(r.quiet(everyone, senders[1], watchers[1]), everyone, senders[1], watchers[1])

	// PostgreSQL restarted under the replicas.
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*watched{senders[0], senders[1]} {
		go func() { errs <- send(t, s, 4, "pg back", nil) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	r.checkAll(r.quiet(everyone, senders[1], watchers[1]), everyone, senders[1], watchers[1])
	r.answeredOnce(1)
	for i, p := range r.procs {
		if i != 1 {
			p.stop(t)
		}
	}
}

// answeredOnce waits until no turn is owed and checks that every person's
// message in the outbox has its reply's end once, never twice: one lane's
// turns ran on whichever replica held its lease, and those the killed
// replica held (running: ended, its reply stopped, or none when it had not
// begun one; queued: run) were taken over once its lease expired
// (--lease-ttl 1s).
func (r *fleetRig) answeredOnce(unanswered int) {
	r.t.Helper()
	deadline := time.Now().Add(3 * testgw.Wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
		// The queue is read before the outbox: a turn that ends between
		// the two reads has its reply's end in the outbox read after it.
		// (Read the other way round, a reply committed after the outbox
		// was read and before the queue was looked at went missing.)
		owed, err := r.st.Turns(ctx)
		var h int64
		if err == nil {
			h, err = r.st.OutboxHead(ctx)
		}
		asked, stops, dropped := 0, map[string]int{}, map[string]bool{}
		var texts, replies []string
		if err == nil {
			err = r.st.ScanEvents(ctx, 0, h, func(ev *core.Event) error {
				switch {
				case ev.Type == core.EvMessage && ev.Message != nil && ev.Message.Role == core.RoleUser:
					asked++
					texts = append(texts, ev.Message.Text)
				case ev.Type == core.EvMessageStop && ev.Message != nil:
					stops[ev.Message.ID]++
					replies = append(replies, ev.Message.Text)
				case ev.Type == core.EvMessageDeleted:
					// A cut-off reply shown streaming before its row was
					// stored is dropped (turn.Runner.SettleCutOff): its
					// stream is ended too.
					for _, id := range ev.MessageIDs {
						dropped[id] = true
					}
				}
				return nil
			})
		}
		cancel()
		for id, n := range stops {
			if n > 1 {
				r.t.Fatalf("reply %s ended %d times", id, n)
			}
		}
		for id := range dropped {
			if stops[id] > 0 {
				r.t.Fatalf("reply %s both ended and dropped", id)
			}
			stops[id] = 1
		}
		if err == nil && len(stops) > asked {
			r.t.Fatalf("%d replies ended for %d messages: a message was answered twice", len(stops), asked)
		}
		// Done once no turn is owed: each message was answered, but for
		// at most unanswered: the killed replica's running turn is ended
		// without a reply when it was cut off before its first words.
		if err == nil && len(owed) == 0 {
			if asked-len(stops) > unanswered {
				r.t.Fatalf("%d of %d messages answered, no turn owed: more than %d left unanswered: %q (the echo agent's replies say what they answer)\n%s",
					len(stops), asked, unanswered, unechoed(texts, replies), r.logs())
			}
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%d of %d messages answered (%v), turns still owed %+v: the killed replica's lane was not taken over", len(stops), asked, err, owed)
		}
		time.Sleep(50 * time.Millisecond) // the store is polled: no event of the replicas' to wait on
	}
}

// unechoed is what of asked no reply repeats.
func unechoed(asked, replies []string) []string {
	left := map[string]int{}
	for _, r := range replies {
		left[r]++
	}
	var out []string
	for _, a := range asked {
		if left[a] > 0 {
			left[a]--
			continue
		}
		out = append(out, a)
	}
	return out
}

// logs is what the replicas said on stderr, for a failure's message.
func (r *fleetRig) logs() string {
	var b strings.Builder
	for i, p := range r.procs {
		fmt.Fprintf(&b, "replica %d:\n%s\n", i, strings.Join(p.stderr.snapshot(), "\n"))
	}
	return b.String()
}

// checkAll: the devices that stayed connected have every frame of want
// once, in order, before anything committed later; the reconnected ones have every frame, and no frame twice on one
// connection (across a reconnect, sync replays what was not proven).
func count(keys []string, typ string) (n int) {
	for _, k := range keys {
		if strings.HasPrefix(k, typ+" ") {
			n++
		}
	}
	return n
}

// diff says where got and want part.
func diff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			return fmt.Sprintf("from frame %d: got %v, want %v", i, got[i:min(len(got), i+6)], want[i:min(len(want), i+6)])
		}
	}
	return "the same"
}

func (r *fleetRig) checkAll(want []string, everyone []*watched, moved ...*watched) {
	r.t.Helper()
	for _, w := range everyone {
		got := w.all()
		if !slices.Contains(moved, w) {
			if !slices.Equal(got[:min(len(got), len(want))], want) {
				r.t.Fatalf("%s: not every frame once in cursor order (%d frames, %d in the outbox): %s", w.name, len(got), len(want), diff(got, want))
			}
			continue
		}
		if m := missing(got, want); len(m) > 0 {
			r.t.Fatalf("%s lacks %v", w.name, m)
		}
		w.mu.Lock()
		for i, c := range w.conns {
			seen := map[string]bool{}
			for _, k := range c {
				if seen[k] && !strings.HasPrefix(k, "agent.") {
					r.t.Errorf("%s: %q twice on connection %d", w.name, k, i)
				}
				seen[k] = true
			}
		}
		w.mu.Unlock()
	}
}

// A replica killed -9 while it runs a lane's turn, with more turns of the
// lane queued through another replica: once its lease (--lease-ttl 1s)
// expires the other takes the lane over, the cut-off turn is not run again
// (its reply ends, stopped; or, when the replica died before the reply's
// row was stored, the devices are told to drop it) and the queued ones are
// answered, each once.
func TestReplicaKilledMidTurnIsTakenOver(t *testing.T) {
	r := newFleetRig(t, func(r *fleetRig) {
		r.replica(0, "--echo-delay", "2s") // the later flag wins: a turn that lasts
		r.replica(1)
	})
	a, b := watch(t, "phone", r.addrs[0]), watch(t, "tablet", r.addrs[1])
	if err := send(t, a, 1, "slow", nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testgw.Wait)
	for {
		a.mu.Lock()
		started := a.start
		a.mu.Unlock()
		if started > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replica 0 never started the turn")
		}
		time.Sleep(10 * time.Millisecond) // a counter of the reader's: no event to wait on
	}
	if err := send(t, b, 2, "queued", nil); err != nil {
		t.Fatal(err)
	}
	if err := r.procs[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	r.procs[0].cmd.Wait()
	r.answeredOnce(0) // the cut-off turn had begun its reply: it ends stopped
	r.procs[1].stop(t)
}
