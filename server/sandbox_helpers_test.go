package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/fakeopenai"
	"github.com/irisgate/irisgate/internal/testgw"

	"github.com/irisgate/irisgate/sandbox"
	"github.com/irisgate/irisgate/server"
)

// agSandbox is the sandbox the gateway's tools get in production (the
// data directory hidden but its media), with a temp directory of the
// test's own. IRISGATE_TEST_SANDBOX=landlock|off runs the suite behind a
// weaker wall.
func agSandbox(t testing.TB, work, data string) *sandbox.Sandbox {
	t.Helper()
	want, err := sandbox.ParseWall(os.Getenv("IRISGATE_TEST_SANDBOX"))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{
		Temp: filepath.Join(t.TempDir(), "tmp"), Want: want,
		Hide: []string{data}, Expose: []string{filepath.Join(data, server.MediaDir)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func jsonArgs(kv ...any) string {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// sbCall queues a model response calling a tool with these arguments.
func (r *agRig) sbCall(name string, kv ...any) {
	r.fake.Push(fakeopenai.Script{Chunks: fakeopenai.ToolCall("", fmt.Sprintf("call_%d", time.Now().UnixNano()), name, jsonArgs(kv...), 5)})
}

// tap is a TCP listener on the host's loopback that keeps what it gets.
type tap struct {
	addr string
	mu   sync.Mutex
	got  []string
	conn chan struct{}
}

func newTap(t *testing.T) *tap {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	tp := &tap{addr: ln.Addr().String(), conn: make(chan struct{}, 16)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				all, _ := readRequest(c)
				tp.mu.Lock()
				tp.got = append(tp.got, string(all))
				tp.mu.Unlock()
				tp.conn <- struct{}{}
			}()
		}
	}()
	return tp
}

// readRequest reads what a client sends: an HTTP request (headers and a
// Content-Length body, then a 200 so curl finishes at once), or raw bytes
// until the client closes.
func readRequest(c net.Conn) (string, error) {
	br := bufio.NewReader(c)
	var all strings.Builder
	length, isHTTP := -1, false
	for {
		line, err := br.ReadString('\n')
		all.WriteString(line)
		if err != nil {
			return all.String(), err
		}
		if all.Len() == len(line) {
			isHTTP = strings.HasPrefix(line, "POST ") || strings.HasPrefix(line, "GET ")
		}
		if !isHTTP {
			continue
		}
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && strings.EqualFold(k, "Content-Length") {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
		if line == "\r\n" {
			break
		}
	}
	body := make([]byte, max(length, 0))
	_, err := io.ReadFull(br, body)
	all.Write(body)
	c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
	return all.String(), err
}

// received returns what came in; for want connections it waits for them.
func (tp *tap) received(t *testing.T, want int) []string {
	t.Helper()
	for range want {
		select {
		case <-tp.conn:
		case <-time.After(testgw.Wait):
			t.Fatalf("the listener got %d connections within %v, want %d", len(tp.got), testgw.Wait, want)
		}
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]string(nil), tp.got...)
}

// untilWithin is until with a longer deadline.
func untilWithin(t *testing.T, d *testgw.Device, stop func(client.Frame) bool, within time.Duration) []client.Frame {
	t.Helper()
	deadline := time.Now().Add(within)
	var got []client.Frame
	for {
		f, ok := d.NextWithin(max(time.Until(deadline), 0))
		if !ok {
			t.Fatalf("device %s: the awaited frame did not come within %v (got: %s)", d.ID, within, typesOf(got))
		}
		got = append(got, f)
		if stop(f) {
			return got
		}
	}
}

// sbApproval waits for an approval picker.
func sbApproval(t *testing.T, d *testgw.Device) approval {
	t.Helper()
	f := d.Expect("picker.approval", nil)
	var p approval
	if err := f.Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p
}
