package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/client"
	"github.com/irisgate/irisgate/internal/testgw"
	"github.com/irisgate/irisgate/proto/irisv1"
)

// A conversation in irisv1's types over a real gateway: hello.ack typed,
// a message.send echoed as an irisv1.Message, history as irisv1.History,
// an error answer as a *ServerError, each frame valid per the schema.
func TestRequestsInIrisv1Types(t *testing.T) {
	g := testgw.Start(t)
	d := g.Dial(t, "typed")
	ctx, cancel := context.WithTimeout(context.Background(), testgw.Wait)
	defer cancel()

	ack := d.HelloAck()
	if !ack.ServerCaps.Streaming || len(ack.Channels) == 0 || ack.Channels[0].ChatID == "" {
		t.Fatalf("hello.ack: %+v", ack)
	}
	lane := client.Lane{ChatID: "default"}
	f, err := d.Request(ctx, irisv1.TypeMessageSend, lane, irisv1.MessageSend{Text: "typed hello"})
	if err != nil {
		t.Fatal(err)
	}
	echo, err := client.Payload[irisv1.Message](f)
	if err != nil || echo.Text != "typed hello" || echo.Role != "user" || f.Lane() != lane {
		t.Fatalf("echo %+v in %+v: %v", echo, f.Lane(), err)
	}
	d.Expect(irisv1.TypeAgentIdle, nil)
	f, err = d.Request(ctx, irisv1.TypeHistory, lane, irisv1.HistoryRequest{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	h, err := client.Payload[irisv1.History](f)
	if err != nil || len(h.Messages) < 2 || h.Messages[0].MessageID != echo.MessageID {
		t.Fatalf("history %+v: %v", h, err)
	}
	// Asking for the wrong payload type is an error, not an empty value.
	if _, err := client.Payload[irisv1.Message](f); err == nil || !strings.Contains(err.Error(), "irisv1.History") {
		t.Fatalf("a history frame read as a message: %v", err)
	}
	f, err = d.Request(ctx, irisv1.TypeAgentStop, client.Lane{ChatID: "chan_nope"}, irisv1.AgentStop{})
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != irisv1.CodeNotFound {
		t.Fatalf("agent.stop in an unknown chat: %v", err)
	}
	if _, perr := client.Payload[irisv1.AgentIdle](f); !errors.As(perr, &se) || se.Code != irisv1.CodeNotFound {
		t.Fatalf("Payload of an error frame: %v", perr)
	}
	if e, perr := client.Payload[client.ServerError](f); perr != nil || e.Code != irisv1.CodeNotFound {
		t.Fatalf("Payload[ServerError] of an error frame: %+v, %v", e, perr)
	}
}

// A Frame reads and writes the wire's envelope, like irisv1.Envelope.
func TestFrameJSONIsTheEnvelope(t *testing.T) {
	in := `{"v":1,"id":5,"type":"message","chat_id":"default","thread_id":"t_1","cursor":9,"payload":{"text":"hi"}}`
	var f client.Frame
	if err := json.Unmarshal([]byte(in), &f); err != nil {
		t.Fatal(err)
	}
	if f.ID != 5 || f.Type != irisv1.TypeMessage || f.Lane() != (client.Lane{ChatID: "default", ThreadID: "t_1"}) || f.Cursor != 9 || string(f.Payload) != `{"text":"hi"}` {
		t.Fatalf("decoded %+v", f)
	}
	out, err := json.Marshal(f)
	if err != nil || string(out) != in {
		t.Fatalf("encoded %s, %v; want %s", out, err, in)
	}
	env, _ := json.Marshal(f.Envelope)
	if string(env) != in {
		t.Fatalf("the embedded Envelope encodes as %s", env)
	}
}
