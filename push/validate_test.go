package push

import (
	"errors"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// FuzzValidNtfyTopic: the gateway takes exactly the topics an ntfy
// server would (server/server.go topicRegex, less the default disallowed
// names), whatever a device sends.
func FuzzValidNtfyTopic(f *testing.F) {
	for _, s := range []string{"phone", "my.phone", "docs", "", strings.Repeat("a", 64), strings.Repeat("a", 65), "ä", "a b", "a/b", "-_"} {
		f.Add(s)
	}
	re := regexp.MustCompile(`^[-_A-Za-z0-9]{1,64}$`)
	f.Fuzz(func(t *testing.T, s string) {
		want := re.MatchString(s) && !slices.Contains(ntfyDisallowed, s)
		if got := ValidNtfyTopic(s) == nil; got != want {
			t.Fatalf("ValidNtfyTopic(%q) ok = %v, ntfy would say %v", s, got, want)
		}
	})
}

// FuzzNtfyAnswer: any answer a server (or a proxy in front of it) gives
// is read without a panic, a 2xx as sent and anything else as an *Error.
func FuzzNtfyAnswer(f *testing.F) {
	f.Add(400, `{"code":40010,"http":400,"error":"invalid request: topic name is not allowed"}`)
	f.Add(404, `<html>nginx</html>`)
	f.Add(200, `{"id":"x"}`)
	f.Add(429, `{"code":"42909"}`)
	f.Fuzz(func(t *testing.T, status int, body string) {
		if status < 100 || status > 999 {
			return
		}
		res := &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(body))}
		err := ntfyAnswer("http://ntfy.invalid", res)
		var e *Error
		if (status/100 == 2) != (err == nil) || (err != nil && !errors.As(err, &e)) {
			t.Fatalf("%d %q: %v", status, body, err)
		}
	})
}
