package wire

import (
	"encoding/json"
	"testing"

	"github.com/coder/websocket"
)

func TestBilingual(t *testing.T) {
	f := Bilingual(
		&Fatal{Frame: []byte(`{"t":"error","code":"auth_required","message":"m \"q\"","fatal":true}`), Status: websocket.StatusPolicyViolation, Reason: "auth_required"},
		&Fatal{Frame: []byte(`{"v":1,"type":"error","payload":{"code":"unsupported","message":"m"},"t":"ignored"}`), Status: websocket.StatusMessageTooBig, Reason: "other"},
	)
	want := `{"t":"error","code":"auth_required","message":"m \"q\"","fatal":true,"v":1,"type":"error","payload":{"code":"unsupported","message":"m"}}`
	if string(f.Frame) != want {
		t.Errorf("\n got %s\nwant %s", f.Frame, want)
	}
	if !json.Valid(f.Frame) {
		t.Error("not JSON")
	}
	if f.Status != websocket.StatusPolicyViolation || f.Reason != "auth_required" {
		t.Errorf("closes with %v %q, want the first's", f.Status, f.Reason)
	}
}
