package bench

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irisgate/irisgate/agent"
	"github.com/irisgate/irisgate/server"
)

// childEnv, when set, makes the test binary a gateway: the memory scenario
// runs its gateway as a subprocess, and under go test the executable is
// this test binary, not irisgate.
const childEnv = "IRISGATE_BENCH_TEST_GATEWAY"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(serveChild(spec))
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
				Scenarios: []string{name}, Quick: true, TempDir: t.TempDir(), GatewayCmd: childGateway,
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
		})
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
