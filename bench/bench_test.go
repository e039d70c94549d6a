package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/server"
)

// childEnv, when set, makes the test binary a gateway: the memory scenario
// runs its gateway as a subprocess, and under go test the executable is
// this test binary, not irisgate.
const childEnv = "IRISGATE_BENCH_TEST_GATEWAY"

// ratiosChildEnv, when set, makes the test binary a child of the ratios
// scenario (what "irisgate bench --child" is outside tests).
const ratiosChildEnv = "IRISGATE_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(serveChild(spec))
	}
	if spec := os.Getenv(ratiosChildEnv); spec != "" {
		if err := RunChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveChild runs a gateway like "irisgate serve" until SIGTERM. spec is
// "listen|dataDir|token".
func serveChild(spec string) int {
	parts := strings.SplitN(spec, "|", 3)
	if len(parts) != 3 {
		fmt.Fprintln(os.Stderr, "bad", childEnv)
		return 2
	}
	ln, err := net.Listen("tcp", parts[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := server.AppConfig{DataDir: parts[1], Token: parts[2],
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	cfg.Agent = &agent.Echo{}
	app, err := server.Open(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go app.Serve(ln)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	app.Close(ctx)
	return 0
}

func childGateway(listen, dataDir, token string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+listen+"|"+dataDir+"|"+token)
	return cmd, nil
}

func testChild(spec string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), ratiosChildEnv+"="+spec)
	return cmd, nil
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestQuick runs every scenario in its quick size, one subtest each (go
// test -run TestQuick/storm runs one), and checks only that each completes
// and loses nothing; timings are not judged here.
func TestQuick(t *testing.T) {
	for _, name := range All {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var report bytes.Buffer
			results, err := Run(ctx, Options{
				Scenarios: []string{name}, Quick: true, TempDir: t.TempDir(), GatewayCmd: childGateway, ChildCmd: testChild,
				Progress: logWriter{t}, ScenarioTimeout: 2 * time.Minute,
			}, &report)
			t.Log("\n" + report.String())
			if err != nil {
				t.Fatal(err)
			}
			if len(results) != 1 {
				t.Fatalf("%d results, want 1", len(results))
			}
			r := results[0]
			if r.Err != nil {
				t.Errorf("%s: %v", r.Name, r.Err)
			}
			if r.Lost != 0 {
				t.Errorf("%s: %d frames lost", r.Name, r.Lost)
			}
			for _, f := range r.Figures {
				if f.Check && f.Met != nil && !*f.Met {
					t.Errorf("%s: check failed: %s = %s (want %s)", r.Name, f.Label, f.Value, f.Target)
				}
			}
			if name == Ratios {
				checkRatioRows(t, r.Rows)
			}
		})
	}
}

// checkRatioRows checks that every ratio mode produced its rows, each a
// finite, positive value next to a positive baseline. Nothing is timed:
// the figures only have to be there and make sense.
func checkRatioRows(t *testing.T, rows []Row) {
	t.Helper()
	want := map[string]int{ // rows a quick run makes, by mode name's start
		"fan-out burst": 5, "one person's": 1, "fan-out paced": 3, "HTTP publishers": 2, "handshake": 2,
		"request round trip": 2, "recovery": 2, "storm": 2, "idle connections": 2, "streamed reply": 4,
	}
	got := map[string]int{}
	for _, r := range rows {
		for k := range want {
			if strings.Contains(r.Mode, k) {
				got[k]++
			}
		}
		v, b := r.Value, r.Base
		if !(v > 0) || math.IsInf(v, 0) || !(b > 0) || math.IsInf(b, 0) || !(r.Ratio() > 0) {
			t.Errorf("%s / %s: value %v, baseline %v: want both finite and > 0", r.Mode, r.Metric, v, b)
		}
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("mode %q: %d rows, want %d", k, got[k], n)
		}
	}
	for _, r := range rows {
		switch {
		case strings.HasPrefix(r.Metric, "latency p99") || r.Metric == "p99":
			// p99 ≥ p50 of the same mode.
			for _, q := range rows {
				if q.Mode == r.Mode && (q.Metric == "latency p50" || q.Metric == "p50") && q.Value > r.Value {
					t.Errorf("%s: p50 %v > p99 %v", r.Mode, q.Value, r.Value)
				}
			}
		case strings.HasPrefix(r.Metric, "bytes on the wire"):
			// Every update carries the whole text so far: the wire holds at
			// least the reply, uncompressed.
			if r.Value < r.Base && !strings.Contains(r.Note, "negotiated:") {
				t.Errorf("%s: %v bytes on the wire for a %v-byte reply, uncompressed", r.Metric, r.Value, r.Base)
			}
		}
	}
}

func TestParseRatioModes(t *testing.T) {
	got, err := ParseRatioModes("wire, burst")
	if err != nil || strings.Join(got, ",") != "burst,wire" {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ParseRatioModes("burst,nope"); err == nil {
		t.Fatal("unknown mode accepted")
	}
	if got, _ := ParseRatioModes("all"); len(got) != len(AllRatioModes) {
		t.Fatalf("all = %v", got)
	}
}

// The child accepts a public token: it must refuse to listen anywhere
// but loopback, and refuse specs it does not understand.
func TestChildSpec(t *testing.T) {
	ok := childSpec{Mode: childIrisgate, Listen: "127.0.0.1:1234", Dir: "/tmp/x", Lanes: 3, History: 5000}
	got, err := parseChildSpec(ok.encode())
	if err != nil || got != ok {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []childSpec{
		{Mode: childIrisgate, Listen: "0.0.0.0:1234", Dir: "/tmp/x"},
		{Mode: childBare, Listen: "192.168.1.2:80"},
		{Mode: childBare, Listen: ":8080"},
		{Mode: "other", Listen: "127.0.0.1:1"},
		{Mode: childIrisgate, Listen: "127.0.0.1:1"},
		{Mode: childIrisgate, Listen: "127.0.0.1:1", Dir: "/tmp/x", Lanes: 5000},
		{Mode: childIrisgate, Listen: "127.0.0.1:1", Dir: "/tmp/x", History: maxChildHistory + 1},
	} {
		if _, err := parseChildSpec(bad.encode()); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

func TestStreamAsk(t *testing.T) {
	a := streamAsk{events: 1500, chunk: 8, rate: 1000}
	if got, ok := parseStreamAsk(a.text()); !ok || got != a {
		t.Fatalf("round trip: %+v %v", got, ok)
	}
	for _, s := range []string{"pub 1 lorem", "bench-stream events=1 chunk=1", "bench-stream events=1000000 chunk=8 rate=1", "bench-stream events=-1 chunk=8 rate=1"} {
		if _, ok := parseStreamAsk(s); ok {
			t.Errorf("accepted %q", s)
		}
	}
	if r := replyText(12_000); len(r) != 12_000 || strings.ContainsAny(r, "\\\"\n") {
		t.Fatalf("replyText: %d bytes", len(r))
	}
}

// The batched-write baseline writes frames by hand: the library irisgate
// uses must read them as the messages they are.
func TestHandFramesReadByLibrary(t *testing.T) {
	frame := sampleFrame(300)
	mux := http.NewServeMux()
	mux.HandleFunc("/raw", func(w http.ResponseWriter, r *http.Request) {
		conn, err := hijackUpgrade(w, r)
		if err != nil {
			return
		}
		defer conn.Close()
		var buf []byte
		for range 16 {
			buf = wsFrame(buf, frame)
		}
		buf = wsFrame(buf, bytes.Repeat([]byte("x"), 70_000)) // the 8-byte length form
		conn.Write(buf)
		io.Copy(io.Discard, conn) // until the client goes
	})
	srv, addr, err := serveLoopback(mux)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/raw", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	for i := range 17 {
		typ, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if typ != websocket.MessageText || (i < 16 && !bytes.Equal(b, frame)) || (i == 16 && len(b) != 70_000) {
			t.Fatalf("message %d: %v, %d bytes", i, typ, len(b))
		}
	}
}

func TestParseScenarios(t *testing.T) {
	got, err := ParseScenarios("e, a,storm")
	if err != nil || strings.Join(got, ",") != "fanout,storm,memory" {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ParseScenarios("fanout,bogus"); err == nil {
		t.Fatal("bogus scenario accepted")
	}
	if got, _ := ParseScenarios("all"); len(got) != len(All) {
		t.Fatalf("all = %v", got)
	}
}

func TestFrameInspection(t *testing.T) {
	f := []byte(`{"v":1,"id":42,"type":"sync.done","payload":{"cursor":99}}`)
	if frameID(f) != 42 || string(frameType(f)) != "sync.done" || payloadCursor(f) != 99 || envCursor(f) != 0 {
		t.Fatalf("sync.done: id %d type %s cursor %d/%d", frameID(f), frameType(f), payloadCursor(f), envCursor(f))
	}
	f = []byte(`{"v":1,"type":"message","chat_id":"default","cursor":7,"payload":{"message_id":"m_1","role":"user","text":"hi","ts":1}}`)
	if frameID(f) != 0 || envCursor(f) != 7 || string(messageID(f)) != "m_1" || string(chatID(f)) != "default" {
		t.Fatalf("message: id %d cursor %d message_id %s", frameID(f), envCursor(f), messageID(f))
	}
	f = []byte(`{"v":1,"type":"message.update","chat_id":"default","payload":{"message_id":"m_2","text":"tok tok "}}`)
	if textLen(f) != 8 {
		t.Fatalf("textLen = %d", textLen(f))
	}
}
