package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// normalizeErrors is client middleware that puts every error answer in the
// shape the OpenAI client decodes ({"error":{"message",…}}). The client
// reads only that shape: an empty body (Caddy's reverse_proxy with its
// upstream down answers 502 with none), plain text or HTML (nginx), vLLM's
// older top-level {"object":"error","message",…}, FastAPI's {"detail":…}
// or llama.cpp's numeric "code" would otherwise come back as a JSON
// decoding error, with the status and the endpoint lost.
func normalizeErrors(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	res.Body.Close()
	msg, typ, code := errorFields(body)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": "", "code": code}})
	res.Body = io.NopCloser(bytes.NewReader(b))
	res.ContentLength = int64(len(b))
	res.Header.Set("Content-Type", "application/json")
	return res, nil
}

// errorFields finds the message, type and code in an error body (empty
// when it has none): {"error":{…}} (OpenAI, llama.cpp with a numeric
// code), {"error":"…"}, vLLM's older top-level fields, FastAPI's "detail".
func errorFields(body []byte) (msg, typ, code string) {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil {
		return bodySnippet(body, 300), "", "" // HTML (nginx, Cloudflare), plain text (Envoy)
	}
	if len(v.Error) > 0 {
		var e struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &e) == nil && e.Message != "":
			var c string
			if json.Unmarshal(e.Code, &c) != nil && len(e.Code) > 0 && string(e.Code) != "null" {
				c = string(e.Code) // llama.cpp: "code": 503
			}
			return e.Message, e.Type, c
		case json.Unmarshal(v.Error, &s) == nil:
			return s, "", ""
		}
	}
	if v.Message != "" {
		return v.Message, v.Type, ""
	}
	if len(v.Detail) > 0 {
		var s string
		if json.Unmarshal(v.Detail, &s) == nil {
			return s, "", ""
		}
		return truncate(string(v.Detail), 300), "", ""
	}
	return bodySnippet(body, 300), "", ""
}

var (
	// htmlHidden is what a browser does not show of an error page.
	htmlHidden = regexp.MustCompile(`(?is)<(head|script|style)\b.*?</(head|script|style)\s*>`)
	htmlTag    = regexp.MustCompile(`(?s)<[^>]*>`)
)

// bodySnippet is what an error body says, for the person: an HTML page's
// text (nginx's 502 page is "502 Bad Gateway nginx"), or the body as it
// is, on one line, at most n bytes, and never longer than body. "" only
// when it says nothing at all.
func bodySnippet(body []byte, n int) string {
	s := strings.ToValidUTF8(string(body), "")
	if strings.HasPrefix(strings.TrimSpace(s), "<") {
		text := htmlTag.ReplaceAllString(htmlHidden.ReplaceAllString(s, " "), " ")
		if strings.TrimSpace(text) == "" {
			text = htmlTag.ReplaceAllString(s, " ") // all it says is in its <title>
		}
		s = html.UnescapeString(text)
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = truncate(s, n-len("…"))
	}
	return s
}

// describeAPIError turns a failed call to endpoint into a sentence a person
// can act on. started says the server had begun to answer.
func describeAPIError(err error, endpoint string, started bool) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		msg := truncate(strings.TrimSpace(apiErr.Message), 300)
		where := endpoint
		if apiErr.Request != nil && apiErr.Request.URL != nil {
			u := *apiErr.Request.URL
			u.RawQuery, u.User = "", nil
			where = apiErr.Request.Method + " " + u.String()
		}
		status := fmt.Sprintf("HTTP %d", apiErr.StatusCode)
		if t := http.StatusText(apiErr.StatusCode); t != "" {
			status += " " + t
		}
		switch apiErr.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("the model provider at %s refused the API key (%s%s)", endpoint, status, orSuffix(msg))
		case http.StatusTooManyRequests:
			return fmt.Errorf("the model provider at %s is rate limiting us (%s%s) and retries did not help", endpoint, status, orSuffix(msg))
		case http.StatusNotFound:
			return fmt.Errorf("the model provider at %s does not know this model or endpoint (%s%s)", endpoint, status, orSuffix(msg))
		}
		if msg == "" {
			return fmt.Errorf("%s answered %s with an empty error: no reason given", where, status)
		}
		return fmt.Errorf("the model provider at %s answered %s: %s", endpoint, status, msg)
	}
	if reason, ok := unreachable(err); ok {
		return fmt.Errorf("could not reach %s: %s", endpoint, reason)
	}
	if !started {
		return fmt.Errorf("the connection to %s broke before the reply started (%v): send again or /retry", endpoint, unwrapURL(err))
	}
	return fmt.Errorf("the model's stream broke off before the reply was complete (%v); what arrived is kept: send again or /retry", unwrapURL(err))
}

func orSuffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// unreachable says why a connection could not be made, when that is what
// failed.
func unreachable(err error) (string, bool) {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "no such host " + dns.Name, true
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return "", false
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (is the server running, on that port?)", true
	case op.Timeout():
		return "the connection timed out", true
	}
	return unwrapURL(op.Err).Error(), true
}

// Reasoning efforts, least to most.
var efforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

var quotedEffort = regexp.MustCompile(`'(none|minimal|low|medium|high|xhigh)'`)

// refusedEffort reads a 400 that refuses the reasoning effort sent (vLLM's
// pydantic check: "Input should be 'low', 'medium' or 'high'" under
// reasoning_effort). It returns the effort to send instead, "" to send
// none, and the efforts the server named.
func refusedEffort(err error, sent string) (use string, accepted []string, ok bool) {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		return "", nil, false
	}
	msg := strings.ToLower(apiErr.Message)
	if !strings.Contains(msg, "reasoning_effort") && !strings.Contains(msg, "reasoning effort") {
		return "", nil, false
	}
	for _, m := range quotedEffort.FindAllStringSubmatch(msg, -1) {
		if m[1] != sent && m[1] != "none" && !slices.Contains(accepted, m[1]) {
			accepted = append(accepted, m[1])
		}
	}
	if sent == "none" || len(accepted) == 0 {
		return "", accepted, true
	}
	// The nearest accepted effort, the stronger one on a tie.
	at := slices.Index(efforts, sent)
	best, dist := "", len(efforts)
	for _, a := range accepted {
		d := slices.Index(efforts, a) - at
		if d < 0 {
			d = -d*2 + 1 // weaker is farther than stronger by the same steps
		} else {
			d *= 2
		}
		if d < dist {
			best, dist = a, d
		}
	}
	return best, accepted, true
}
