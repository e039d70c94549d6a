package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawMCP is a streamable-HTTP MCP server written by hand, for what the
// SDK's own server would never send: it speaks the transport as the
// specification (2025-06-18, "Streamable HTTP") has it. A POST carries one
// JSON-RPC message; a notification is answered 202 Accepted; a request
// with application/json (one response) or, when answer returns a stream,
// text/event-stream (notifications, then the response); the optional GET
// stream is refused with 405, as a server without one does.
type rawMCP struct {
	URL string
	// answer returns the result of a request, or an SSE stream's events
	// (each a JSON-RPC message) ending with the response, or raw bytes of
	// a JSON body.
	answer func(method string, params json.RawMessage, id json.RawMessage) (result any, stream []any, raw []byte)
}

func newRawMCP(t *testing.T, answer func(method string, params, id json.RawMessage) (any, []any, []byte)) *rawMCP {
	s := &rawMCP{answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/mcp"
	return s
}

func (s *rawMCP) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err := json.Unmarshal(body, &msg); err != nil {
		http.Error(w, "bad JSON-RPC", http.StatusBadRequest)
		return
	}
	if msg.ID == nil || msg.Method == "" { // a notification, or a response of ours
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result any
	var stream []any
	var raw []byte
	if msg.Method == "initialize" {
		result = map[string]any{"protocolVersion": "2025-06-18", "serverInfo": map[string]any{"name": "raw", "version": "1"},
			"capabilities": map[string]any{"tools": map[string]any{"listChanged": true}}}
	} else {
		result, stream, raw = s.answer(msg.Method, msg.Params, msg.ID)
	}
	response := map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result}
	switch {
	case raw != nil:
		w.Header().Set("Content-Type", "application/json")
		w.Write(raw)
	case stream != nil:
		w.Header().Set("Content-Type", "text/event-stream")
		for _, m := range append(stream, response) {
			b, _ := json.Marshal(m)
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", b)
		}
	default:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(response)
	}
}

func rawTool(name string) map[string]any {
	return map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"}}
}

func (r *mcpRig) downWith(name, want string) MCPStatus {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := r.mcp.Wait(ctx, name, func(s MCPStatus) bool { return s.LastError != "" })
	if err != nil {
		r.t.Fatal(err)
	}
	if st.State == MCPConnected || !strings.Contains(st.LastError, want) {
		r.t.Fatalf("status %+v, want an error with %q", st, want)
	}
	return st
}

// TestMCPEndlessToolList: a list of tools whose pages never end is
// refused after 64 pages, with a clear error, instead of being read for
// ever.
func TestMCPEndlessToolList(t *testing.T) {
	var pages atomic.Int32
	srv := newRawMCP(t, func(method string, _, _ json.RawMessage) (any, []any, []byte) {
		if method != "tools/list" {
			return map[string]any{}, nil, nil
		}
		pages.Add(1)
		return map[string]any{"tools": []any{}, "nextCursor": "once more"}, nil, nil
	})
	r := newMCPRigBackoff(t, time.Hour, MCPServer{Name: "raw", URL: srv.URL, Network: true})
	r.downWith("raw", "cannot connect: listing its tools: its list of tools runs past 64 pages")
	if n := pages.Load(); n != maxMCPPages {
		t.Fatalf("%d pages read", n)
	}
}

// TestMCPHugeJSONAnswer: an answer of more than a message's 16 MiB as one
// JSON body (which the SDK reads whole) is cut there and the connection
// fails, saying why.
func TestMCPHugeJSONAnswer(t *testing.T) {
	srv := newRawMCP(t, func(_ string, _, id json.RawMessage) (any, []any, []byte) {
		// Valid JSON once read whole: the padding is white space.
		return nil, nil, fmt.Appendf([]byte(strings.Repeat(" ", maxMCPLine+1)), `{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, id)
	})
	r := newMCPRigBackoff(t, time.Hour, MCPServer{Name: "raw", URL: srv.URL, Network: true})
	r.downWith("raw", "larger than the 16 MiB a message may be")
}

// TestMCPToolListKeptSmall: what the gateway keeps of a listed tool is
// bounded as it is read (its description, its schema's size, a name no
// call could carry), not after the whole list is held.
func TestMCPToolListKeptSmall(t *testing.T) {
	big := strings.Repeat("d", 200<<10)
	srv := newRawMCP(t, func(_ string, params, _ json.RawMessage) (any, []any, []byte) {
		var p struct{ Cursor string }
		json.Unmarshal(params, &p)
		huge := map[string]any{"name": "huge-" + p.Cursor, "description": big, "title": big,
			"annotations": map[string]any{"title": big, "readOnlyHint": true},
			"inputSchema": map[string]any{"type": "object", "description": big}, "outputSchema": map[string]any{"description": big}}
		next := map[string]string{"": "1", "1": "2"}[p.Cursor]
		tools := []any{huge, rawTool(strings.Repeat("n", maxMCPToolName+1))}
		return map[string]any{"tools": tools, "nextCursor": next}, nil, nil
	})
	r := newMCPRig(t, MCPServer{Name: "raw", URL: srv.URL, Network: true})
	st := r.connected("raw")
	s := r.mcp.servers[0]
	s.mu.Lock()
	listed := s.conn.listed
	s.mu.Unlock()
	if len(listed) != 6 {
		t.Fatalf("%d tools listed", len(listed))
	}
	for _, mt := range listed {
		if b, _ := json.Marshal(mt); len(b) > 8<<10 {
			t.Errorf("%.40s… kept as %d bytes", mt.Name, len(b))
		}
	}
	left := strings.Join(st.Left, "\n")
	if len(st.Tools) != 0 || strings.Count(left, "its input schema is 2") != 3 || strings.Count(left, "(a tool with a name of 257 bytes)") != 3 {
		t.Fatalf("offered %v, left out:\n%s", st.Tools, left)
	}
}

// TestMCPToolListChangedFlood: a server saying a thousand times that its
// tools changed has its list read again one request at a time, not once
// per notice at once; the new list is offered.
func TestMCPToolListChangedFlood(t *testing.T) {
	var inFlight, most, lists atomic.Int32
	var mu sync.Mutex
	changed := false
	srv := newRawMCP(t, func(method string, _, _ json.RawMessage) (any, []any, []byte) {
		switch method {
		case "tools/list":
			lists.Add(1)
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			mu.Lock()
			defer mu.Unlock()
			if changed {
				return map[string]any{"tools": []any{rawTool("change"), rawTool("added")}}, nil, nil
			}
			return map[string]any{"tools": []any{rawTool("change")}}, nil, nil
		case "tools/call":
			mu.Lock()
			changed = true
			mu.Unlock()
			notes := make([]any, 1000)
			for i := range notes {
				notes[i] = map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
			}
			return map[string]any{"content": []any{map[string]any{"type": "text", "text": "changed"}}}, notes, nil
		}
		return map[string]any{}, nil, nil
	})
	r := newMCPRig(t, MCPServer{Name: "raw", URL: srv.URL, Network: true})
	r.connected("raw")
	if out := r.call("raw__change", map[string]any{}); out != "changed" {
		t.Fatalf("call: %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.mcp.Wait(ctx, "raw", func(s MCPStatus) bool { return len(s.Tools) == 2 }); err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m != 1 {
		t.Fatalf("%d lists read at once (%d in all)", m, lists.Load())
	}
}
