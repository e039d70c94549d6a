package iris

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/docs"
)

// Every core code, explicitly, and the Iris code its error frame carries:
// a code added to core fails here until it is given one.
func TestIrisErrorCodes(t *testing.T) {
	want := map[core.Code]string{
		core.CodeAuth:          "auth",
		core.CodeForbidden:     "auth", // Iris's enum has no forbidden
		core.CodeNotFound:      "not_found",
		core.CodeRateLimited:   "rate_limited",
		core.CodeMediaTooLarge: "media_too_large",
		core.CodeUnsupported:   "unsupported",
		core.CodeInternal:      "internal",
	}
	// docs/errors.md shows the same table.
	table := "| code | Iris |\n|---|---|\n"
	for _, c := range core.Codes {
		table += fmt.Sprintf("| %s | %v |\n", c, want[c])
	}
	if !strings.Contains(docs.Errors, table) {
		t.Errorf("docs/errors.md lacks this table:\n%s", table)
	}
	for _, c := range core.Codes {
		w, ok := want[c]
		if !ok {
			t.Errorf("core code %q has no Iris code in this test", c)
			continue
		}
		var f struct {
			V       int    `json:"v"`
			ID      int64  `json:"id"`
			Type    string `json:"type"`
			Payload struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(errorFrame(7, &core.Error{Code: c, Message: "m"}), &f); err != nil {
			t.Fatal(err)
		}
		if f.V != 1 || f.ID != 7 || f.Type != "error" || f.Payload.Code != w || f.Payload.Message != "m" {
			t.Errorf("%s: frame %+v, want an error with code %s", c, f, w)
		}
	}
}

// The frames the server used to write by hand, byte for byte.
func TestDialectFrames(t *testing.T) {
	d := NewDialect(Config{}, 1<<20)
	f := d.TooBig()
	if got, want := string(f.Frame), `{"v":1,"type":"error","payload":{"code":"unsupported","message":"frame larger than 1048576 bytes"}}`; got != want {
		t.Errorf("too big:\n got %s\nwant %s", got, want)
	}
	if f.Status != websocket.StatusMessageTooBig || f.Reason != "frame too large" {
		t.Errorf("too big closes with %v %q", f.Status, f.Reason)
	}
	if got, want := string((&Session{}).InternalError()), `{"v":1,"type":"error","payload":{"code":"internal","message":"internal error"}}`; got != want {
		t.Errorf("internal:\n got %s\nwant %s", got, want)
	}
	f = notText([]byte{'"', 0xff, '"'})
	if got, want := string(f.Frame), `{"v":1,"type":"error","payload":{"code":"unsupported","message":"text frame is not valid UTF-8"}}`; got != want {
		t.Errorf("not UTF-8:\n got %s\nwant %s", got, want)
	}
	if f.Status != websocket.StatusInvalidFramePayloadData || !errors.Is(f, ErrNotUTF8) {
		t.Errorf("not UTF-8 closes with %v (%v)", f.Status, f.Err)
	}
	if notText([]byte(`{"type":"ping"}`)) != nil {
		t.Error("a UTF-8 frame is refused")
	}
	f = d.Revoked()
	if got, want := string(f.Frame), `{"v":1,"type":"error","payload":{"code":"auth","message":"this token was revoked"}}`; got != want || f.Reason != "auth" || f.Status != websocket.StatusPolicyViolation {
		t.Errorf("revoked: %s, closed with %v %q", got, f.Status, f.Reason)
	}
}
