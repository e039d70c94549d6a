package fakehermes

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"
)

// These tests hold the fake to what Hermes Agent's own code does in the
// cases the bridge depends on (see the package comment for the versions).

// subscribe opens a run's event stream; the events arrive on the channel,
// which closes with the stream.
func (c *client) subscribe(id string) <-chan map[string]any {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.base+"/v1/runs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		c.t.Fatalf("subscribe: HTTP %d", resp.StatusCode)
	}
	out := make(chan map[string]any, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out <- decode(c.t, line)
			}
		}
	}()
	return out
}

// next returns the next event named name, skipping others.
func next(t *testing.T, evs <-chan map[string]any, name string) map[string]any {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatalf("the stream ended before %s", name)
			}
			if ev["event"] == name {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s", name)
		}
	}
}

func (c *client) start(body string) string {
	c.t.Helper()
	code, _, b := c.do("POST", "/v1/runs", body, key)
	if code != 202 {
		c.t.Fatalf("start: %d %s", code, b)
	}
	return decode(c.t, b)["run_id"].(string)
}

func TestApprovalTimeoutThenASecondRequest(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		s := New(t, Config{Key: key, Legacy: legacy})
		hold := make(chan struct{})
		defer close(hold)
		s.Push(Script{Steps: []Step{
			ApprovalWithin("rm -rf build", "delete", 50*time.Millisecond),
			ToolCompleted("terminal", 0.05, false),
			Approval("sudo rm -rf /srv/data", "delete as root"),
			Hold(hold),
		}})
		c := newClient(t, s)
		id := c.start(`{"input":"clean"}`)
		evs := c.subscribe(id)
		first := next(t, evs, "approval.request")
		second := next(t, evs, "approval.request")
		if second["command"] != "sudo rm -rf /srv/data" {
			t.Fatalf("second request %v", second)
		}
		if r := s.Runs()[0]; len(r.Approvals) != 1 || r.Approvals[0] != "timeout" {
			t.Fatalf("Hermes's own timeout did not deny the first: %+v", r)
		}
		if legacy {
			if first["request_id"] != nil {
				t.Fatalf("legacy approval.request with an id: %v", first)
			}
			// A bare answer resolves the oldest pending one: the second.
			code, _, body := c.do("POST", "/v1/runs/"+id+"/approval", `{"choice":"once","request_id":"ignored"}`, key)
			if code != 200 || s.Runs()[0].Approvals[1] != "once" {
				t.Fatalf("legacy answer: %d %s %+v", code, body, s.Runs()[0])
			}
			continue
		}
		fid, _ := first["request_id"].(string)
		sid, _ := second["request_id"].(string)
		if len(fid) != 32 || sid == fid || first["approval_id"] != fid || first["expires_at"] == nil {
			t.Fatalf("request ids %v / %v", first, second)
		}
		if code, _, body := c.do("POST", "/v1/runs/"+id+"/approval", `{"choice":"once","request_id":"`+fid+`"}`, key); code != 409 || errCode(t, body) != "approval_not_pending" {
			t.Fatalf("answering the expired one: %d %s", code, body)
		}
		if code, _, body := c.do("POST", "/v1/runs/"+id+"/approval", `{"choice":"once","request_id":""}`, key); code != 400 || errCode(t, body) != "invalid_approval_request" {
			t.Fatalf("empty request id: %d %s", code, body)
		}
		code, _, body := c.do("POST", "/v1/runs/"+id+"/approval", `{"choice":"deny","request_id":"`+sid+`"}`, key)
		if m := decode(t, body); code != 200 || m["request_id"] != sid || m["choice"] != "deny" {
			t.Fatalf("answering the second: %d %s", code, body)
		}
		if ev := next(t, evs, "approval.responded"); ev["request_id"] != sid || ev["choice"] != "deny" || ev["resolved"] != float64(1) {
			t.Fatalf("responded %v", ev)
		}
	}
}

// Parallel tools each ask: both approvals are pending at once, in the
// order asked. A bare answer resolves the oldest (resolve_gateway_approval
// pops queue[0]), one naming a request that one, "all" every one; the run
// goes on once both have their answer.
func TestTogetherKeepsTwoApprovalsPending(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		s := New(t, Config{Key: key, Legacy: legacy})
		s.Push(Script{Steps: []Step{
			ToolStarted("delegate_task", "two jobs"),
			Together(Approval("rm -rf build", "delete"), Approval("sudo rm -rf /srv/data", "delete as root")),
			ToolCompleted("delegate_task", 1, false),
			Completed("Done.", 1, 1),
		}})
		c := newClient(t, s)
		id := c.start(`{"input":"clean"}`)
		evs := c.subscribe(id)
		first, second := next(t, evs, "approval.request"), next(t, evs, "approval.request")
		if first["command"] != "rm -rf build" || second["command"] != "sudo rm -rf /srv/data" {
			t.Fatalf("requests %v, %v", first, second)
		}
		answer := `{"choice":"once"}`
		if !legacy {
			answer = `{"choice":"once","request_id":"` + second["request_id"].(string) + `"}`
		}
		if code, _, body := c.do("POST", "/v1/runs/"+id+"/approval", answer, key); code != 200 || decode(t, body)["resolved"] != float64(1) {
			t.Fatalf("answer: %d %s", code, body)
		}
		_, _, body := c.do("GET", "/v1/runs/"+id, "", key)
		if st := decode(t, body); st["status"] != "running" || st["last_event"] != "approval.responded" {
			t.Fatalf("status with one still pending %s", body)
		}
		if code, _, body := c.do("POST", "/v1/runs/"+id+"/approval", `{"choice":"deny","all":true}`, key); code != 200 || decode(t, body)["resolved"] != float64(1) {
			t.Fatalf("deny all: %d %s", code, body)
		}
		next(t, evs, "run.completed")
		// The bare answer went to the oldest, the named one to its request.
		want := "once rm -rf build,deny sudo rm -rf /srv/data"
		if !legacy {
			want = "once sudo rm -rf /srv/data,deny rm -rf build"
		}
		if r := s.Runs()[0]; strings.Join(r.Decided, ",") != want {
			t.Fatalf("Hermes decided %v", r.Decided)
		}
	}
}

func TestApprovalTimeoutLeavesTheStatusWaiting(t *testing.T) {
	s := New(t, Config{Key: key})
	hold := make(chan struct{})
	defer close(hold)
	s.Push(Script{Steps: []Step{ApprovalWithin("rm -rf build", "delete", 20*time.Millisecond), ToolStarted("read_file", "x"), Hold(hold)}})
	c := newClient(t, s)
	id := c.start(`{"input":"clean"}`)
	if !s.Wait(5*time.Second, func(rs []Run) bool { return len(rs[0].Approvals) == 1 }) {
		t.Fatal("no timeout")
	}
	if !s.Wait(5*time.Second, func(rs []Run) bool { return rs[0].Status == "waiting_for_approval" }) {
		t.Fatal("status")
	}
	_, _, body := c.do("GET", "/v1/runs/"+id, "", key)
	if st := decode(t, body); st["status"] != "waiting_for_approval" {
		t.Fatalf("status after the timeout %s", body)
	}
}

func TestSteer(t *testing.T) {
	s := New(t, Config{Key: key})
	s.Push(Script{Steps: []Step{Delta("Reading"), AwaitSteer(), ToolCompleted("read_file", 0.1, false), AwaitSteer(), Completed("Done.", 1, 1)}},
		Script{Steps: []Step{Approval("rm x", "delete")}})
	c := newClient(t, s)
	id := c.start(`{"input":"read"}`)
	evs := c.subscribe(id)
	next(t, evs, "message.delta")
	if code, _, body := c.do("POST", "/v1/runs/"+id+"/steer", `{"input":"  "}`, key); code != 400 || errCode(t, body) != "invalid_steer_input" {
		t.Fatalf("empty steer: %d %s", code, body)
	}
	code, _, body := c.do("POST", "/v1/runs/"+id+"/steer", `{"message":"only errors"}`, key)
	if m := decode(t, body); code != 200 || m["object"] != "hermes.run.steer" || m["accepted"] != true {
		t.Fatalf("steer: %d %s", code, body)
	}
	if ev := next(t, evs, "run.steered"); ev["accepted"] != true {
		t.Fatalf("steered %v", ev)
	}
	if !s.Wait(5*time.Second, func(rs []Run) bool { return len(rs[0].Delivered) == 1 }) {
		t.Fatalf("the steer was not read at the tool boundary: %+v", s.Runs()[0])
	}
	c.do("POST", "/v1/runs/"+id+"/steer", `{"text":"and warnings"}`, key)
	done := next(t, evs, "run.completed")
	if done["pending_steer"] != "and warnings" {
		t.Fatalf("completed %v", done)
	}
	_, _, body = c.do("GET", "/v1/runs/"+id, "", key)
	if decode(t, body)["pending_steer"] != "and warnings" {
		t.Fatalf("status %s", body)
	}
	if code, _, body := c.do("POST", "/v1/runs/"+id+"/steer", `{"input":"late"}`, key); code != 409 || errCode(t, body) != "run_not_accepting_steer" {
		t.Fatalf("steering an ended run: %d %s", code, body)
	}
	waiting := c.start(`{"input":"x"}`)
	s.Wait(5*time.Second, func(rs []Run) bool { return rs[1].Status == "waiting_for_approval" })
	if code, _, body := c.do("POST", "/v1/runs/"+waiting+"/steer", `{"input":"x"}`, key); code != 409 || errCode(t, body) != "run_not_accepting_steer" {
		t.Fatalf("steering a run waiting for approval: %d %s", code, body)
	}

	legacy := New(t, Config{Key: key, Legacy: true})
	lc := newClient(t, legacy)
	lid := lc.start(`{"input":"x"}`)
	code, h, body := lc.do("POST", "/v1/runs/"+lid+"/steer", `{"input":"x"}`, key)
	if code != 404 || body != "404: Not Found" || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		t.Fatalf("legacy steer: %d %q %v", code, body, h)
	}
}

func (c *client) post(path, body, idem string) (int, http.Header, string) {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, resp.Header, b.String()
}

func TestIdempotencyKey(t *testing.T) {
	s := New(t, Config{Key: key})
	c := newClient(t, s)
	code, _, body := c.post("/v1/runs", `{"input":"once"}`, "turn-1")
	m := decode(t, body)
	if code != 202 || m["replayed"] != false {
		t.Fatalf("first: %d %s", code, body)
	}
	code, h, body := c.post("/v1/runs", `{"input":"once"}`, "turn-1")
	r := decode(t, body)
	if code != 202 || r["run_id"] != m["run_id"] || r["replayed"] != true || h.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("replay: %d %s %v", code, body, h)
	}
	if code, _, body := c.post("/v1/runs", `{"input":"other"}`, "turn-1"); code != 409 || errCode(t, body) != "idempotency_key_conflict" {
		t.Fatalf("conflict: %d %s", code, body)
	}
	if code, _, body := c.post("/v1/runs", `{"input":"x"}`, "has space"); code != 400 || errCode(t, body) != "invalid_idempotency_key" {
		t.Fatalf("bad key: %d %s", code, body)
	}
	if n := len(s.Runs()); n != 1 {
		t.Fatalf("%d runs", n)
	}
	legacy := New(t, Config{Key: key, Legacy: true})
	lc := newClient(t, legacy)
	lc.post("/v1/runs", `{"input":"once"}`, "turn-1")
	lc.post("/v1/runs", `{"input":"once"}`, "turn-1")
	if n := len(legacy.Runs()); n != 2 {
		t.Fatalf("legacy Hermes ignores the key: %d runs", n)
	}
}

func TestLegacySweeperDropsAStreamedRunsControls(t *testing.T) {
	s := New(t, Config{Key: key, Legacy: true})
	hold := make(chan struct{})
	s.Push(Script{Steps: []Step{Delta("Working"), Hold(hold), ToolStarted("terminal", "make"), Approval("rm -rf x", "d"), Delta(" on."), Completed("Working on.", 1, 1)}})
	c := newClient(t, s)
	id := c.start(`{"input":"x"}`)
	evs := c.subscribe(id)
	next(t, evs, "message.delta")
	s.Sweep()
	if code, _, body := c.do("POST", "/v1/runs/"+id+"/stop", "", key); code != 404 || errCode(t, body) != "run_not_found" {
		t.Fatalf("stop after the sweep: %d %s", code, body)
	}
	if _, _, body := c.do("GET", "/v1/runs/"+id, "", key); decode(t, body)["status"] != "running" {
		t.Fatalf("status after the sweep: %s", body)
	}
	close(hold)
	var names []string
	for ev := range evs {
		names = append(names, ev["event"].(string))
	}
	if strings.Join(names, ",") != "message.delta,run.completed" { // " on." and the end; the tool and approval events are lost
		t.Fatalf("events after the sweep: %v", names)
	}
	if r := s.Runs()[0]; !r.Swept || len(r.Approvals) != 1 || r.Approvals[0] != "swept" || r.Status != "completed" {
		t.Fatalf("run %+v", r)
	}

	// The current sweeper leaves a streamed run alone.
	cur := New(t, Config{Key: key})
	hold2 := make(chan struct{})
	defer close(hold2)
	cur.Push(Script{Steps: []Step{Delta("Working"), Hold(hold2)}})
	cc := newClient(t, cur)
	cid := cc.start(`{"input":"x"}`)
	cevs := cc.subscribe(cid)
	next(t, cevs, "message.delta")
	cur.Sweep()
	if code, _, body := cc.do("POST", "/v1/runs/"+cid+"/stop", "", key); code != 200 {
		t.Fatalf("stop: %d %s", code, body)
	}
	next(t, cevs, "run.cancelled")
}

func TestRestartAndOtherProcesses(t *testing.T) {
	s := New(t, Config{Key: key})
	hold := make(chan struct{})
	defer close(hold)
	s.Push(Script{Steps: []Step{Hold(hold)}}, Script{Steps: []Step{Hold(hold)}}, Script{Steps: []Step{Hold(hold)}})
	c := newClient(t, s)
	_, _, body := c.post("/v1/runs", `{"input":"kept"}`, "k1")
	kept := decode(t, body)["run_id"].(string)
	lost := c.start(`{"input":"lost"}`)
	s.Wait(5*time.Second, func(rs []Run) bool { return rs[0].Status == "running" && rs[1].Status == "running" })
	s.Restart(t)
	c.c.CloseIdleConnections()
	_, _, body = c.do("GET", "/v1/runs/"+kept, "", key)
	if st := decode(t, body); st["status"] != "interrupted" || st["last_event"] != "run.interrupted" || st["error"] != "The gateway restarted before this run settled." {
		t.Fatalf("kept run after a restart: %s", body)
	}
	if code, _, _ := c.do("GET", "/v1/runs/"+lost, "", key); code != 404 {
		t.Fatalf("a run without a key survived the restart: %d", code)
	}
	if code, _, body := c.do("POST", "/v1/runs/"+kept+"/stop", "", key); code != 200 || decode(t, body)["status"] != "interrupted" {
		t.Fatalf("stopping an interrupted run: %d %s", code, body)
	}
	other := c.start(`{"input":"elsewhere"}`)
	s.Detach(other)
	if code, _, body := c.do("POST", "/v1/runs/"+other+"/stop", "", key); code != 409 || errCode(t, body) != "run_not_active" {
		t.Fatalf("stopping another process's run: %d %s", code, body)
	}
}
