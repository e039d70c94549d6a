package mobile

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/docs"
	"github.com/irisgate/irisgate/proto/mobilev1"
	"github.com/irisgate/irisgate/wire"
)

// Every core code, explicitly, and the Hermes Mobile code it becomes, in
// the hello and after it alike: a code added to core fails here until the
// table gives it one.
func TestMobileCodes(t *testing.T) {
	want := map[core.Code]string{
		core.CodeAuth:          mobilev1.CodeAuthFailed,
		core.CodeForbidden:     mobilev1.CodeForbidden,
		core.CodeNotFound:      mobilev1.CodeBadFrame,
		core.CodeRateLimited:   mobilev1.CodeBadFrame,
		core.CodeMediaTooLarge: mobilev1.CodeTooBig,
		core.CodeUnsupported:   mobilev1.CodeBadFrame,
		core.CodeInternal:      mobilev1.CodeInternal,
	}
	// docs/errors.md shows the same table.
	table := "| code | Hermes Mobile |\n|---|---|\n"
	for _, c := range core.Codes {
		table += fmt.Sprintf("| %s | %v |\n", c, want[c])
	}
	if !strings.Contains(docs.Errors, table) {
		t.Errorf("docs/errors.md lacks this table:\n%s", table)
	}
	for _, c := range core.Codes {
		w, ok := want[c]
		if !ok {
			t.Errorf("core code %q has no Hermes Mobile code in this test", c)
			continue
		}
		if got := fromCore(&core.Error{Code: c, Message: "m"}); got.Code != w || got.Message != "m" {
			t.Errorf("%s → %+v, want %s", c, got, w)
		}
	}
	// Kinds with a code of the protocol's own, each named in
	// docs/errors.md.
	kinds := map[*core.Kind]string{
		wire.ErrHelloTimeout: mobilev1.CodeAuthRequired, wire.ErrHelloEvicted: mobilev1.CodeAuthRequired,
		ErrOffline: mobilev1.CodeDeviceOffline, ErrNotTaken: mobilev1.CodeDeviceOffline, ErrNoFiles: mobilev1.CodeUnsupportedFrame,
	}
	if len(kinds) != len(kindCodes) {
		t.Errorf("kindCodes has %d kinds, this test %d", len(kindCodes), len(kinds))
	}
	for k, w := range kinds {
		args := make([]any, strings.Count(k.Format, "%"))
		if got := fromCore(k.New(args...)); got.Code != w {
			t.Errorf("%s → %s, want %s", k.Name, got.Code, w)
		}
		if !strings.Contains(docs.Errors, "`"+k.Name+"` is `"+w+"`") {
			t.Errorf("docs/errors.md does not say %s is %s", k.Name, w)
		}
	}
	// The protocol's own errors pass as they are; anything else is
	// internal.
	if got := fromCore(&mobilev1.Error{Code: mobilev1.CodeUnsupportedFrame, Message: "x"}); got.Code != mobilev1.CodeUnsupportedFrame || got.Message != "x" {
		t.Errorf("the protocol's error → %+v", got)
	}
	if got := fromCore(errors.New("disk on fire")); got.Code != mobilev1.CodeInternal || got.Message != "internal error" {
		t.Errorf("plain error → %+v", got)
	}
}

func TestDialectFatals(t *testing.T) {
	d := New(Config{})
	for _, tc := range []struct {
		name string
		f    *wire.Fatal
		code string
	}{
		{"too big", d.TooBig(), mobilev1.CodeTooBig},
		{"revoked", d.Revoked(), mobilev1.CodeAuthFailed},
		{"hello timeout", d.Refuse(wire.ErrHelloTimeout.New()), mobilev1.CodeAuthRequired},
	} {
		var e mobilev1.ErrorFrame
		if err := json.Unmarshal(tc.f.Frame, &e); err != nil {
			t.Fatal(err)
		}
		if e.T != "error" || e.Code != tc.code || !e.Fatal || tc.f.Reason != tc.code || tc.f.Status != websocket.StatusPolicyViolation {
			t.Errorf("%s: %s, closed with %v %q", tc.name, tc.f.Frame, tc.f.Status, tc.f.Reason)
		}
	}
	if got, want := string(internalErrorFrame), `{"t":"error","code":"internal_error","message":"internal error","fatal":false}`; got != want {
		t.Errorf("internal:\n got %s\nwant %s", got, want)
	}
}
