package httperr

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/irisgate/irisgate/core"
	"github.com/irisgate/irisgate/docs"
)

// Every core code, explicitly, and its status: a code added to core fails
// here until it is given one.
func TestStatuses(t *testing.T) {
	want := map[core.Code]int{
		core.CodeAuth:          http.StatusForbidden,
		core.CodeForbidden:     http.StatusForbidden,
		core.CodeNotFound:      http.StatusNotFound,
		core.CodeRateLimited:   http.StatusTooManyRequests,
		core.CodeMediaTooLarge: http.StatusRequestEntityTooLarge,
		core.CodeUnsupported:   http.StatusBadRequest,
		core.CodeInternal:      http.StatusInternalServerError,
	}
	// docs/errors.md shows the same table.
	table := "| code | HTTP status |\n|---|---|\n"
	for _, c := range core.Codes {
		table += fmt.Sprintf("| %s | %v |\n", c, want[c])
	}
	if !strings.Contains(docs.Errors, table) {
		t.Errorf("docs/errors.md lacks this table:\n%s", table)
	}
	for _, c := range core.Codes {
		w, ok := want[c]
		if !ok {
			t.Errorf("core code %q has no status in this test", c)
			continue
		}
		if got := Status(&core.Error{Code: c}); got != w {
			t.Errorf("%s → %d, want %d", c, got, w)
		}
	}
	if got := Status(ErrContentType.New("a", "b")); got != http.StatusUnsupportedMediaType {
		t.Errorf("content type → %d", got)
	}
	if got := Status(errors.New("x")); got != http.StatusInternalServerError {
		t.Errorf("plain error → %d", got)
	}
}

func TestWriteAndRead(t *testing.T) {
	kind := core.NewKind("httperr_test_gone", core.CodeNotFound, "no %s here")
	for _, tc := range []struct {
		err    error
		detail bool
		status int
		msg    string
	}{
		{kind.New("cake"), false, 404, "no cake here"},
		{errors.New("disk on fire"), false, 500, "internal error"},
		{errors.New("disk on fire"), true, 500, "internal error: disk on fire"},
	} {
		rec := httptest.NewRecorder()
		Write(rec, tc.err, tc.detail)
		res := rec.Result()
		if res.StatusCode != tc.status || res.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%v: %d %s", tc.err, res.StatusCode, res.Header.Get("Content-Type"))
		}
		var e *core.Error
		if !errors.As(Read(res, 1<<10), &e) || e.Message != tc.msg || e.Code != core.AsError(tc.err).Code {
			t.Errorf("%v: read back %v", tc.err, e)
		}
	}
	res := &http.Response{Status: "502 Bad Gateway", Body: http.NoBody}
	if err := Read(res, 1<<10); err == nil || err.Error() != "the gateway answered 502 Bad Gateway" {
		t.Errorf("no body: %v", err)
	}
}
