package agent

import (
	"io"
	"net/url"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// htmlText is the readable text of an HTML page: its title, and its body
// with block elements on lines of their own, headings marked with #, list
// items with -, links followed by their address (resolved against base),
// and nothing of scripts, styles, templates, SVG or forms' hidden parts.
// It stops once limit bytes of text are written.
func htmlText(r io.Reader, base *url.URL, limit int) (title, text string) {
	z := html.NewTokenizer(r)
	z.SetMaxBuf(1 << 20) // one token (a huge attribute, a huge comment) is bounded too
	w := &textWriter{limit: limit}
	var skip []atom.Atom // elements whose content is not text, innermost last
	inTitle, pre := false, 0
	var href string
	for !w.full() {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return strings.TrimSpace(title), w.String()
		case html.TextToken:
			if len(skip) > 0 {
				continue
			}
			// A page in a charset it does not declare: text stays UTF-8.
			t := strings.ToValidUTF8(string(z.Text()), "\uFFFD")
			if inTitle {
				title = truncate(strings.Join(strings.Fields(title+" "+t), " "), 300)
				continue
			}
			w.text(t, pre > 0)
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			if skipped[a] {
				if tt == html.StartTagToken && !voidElement[a] {
					skip = append(skip, a)
				}
				continue
			}
			if len(skip) > 0 {
				continue
			}
			switch a {
			case atom.Title:
				inTitle = tt == html.StartTagToken
			case atom.Br:
				w.newline(1)
			case atom.Hr:
				w.newline(1)
				w.raw("---")
				w.newline(1)
			case atom.Li:
				w.newline(1)
				w.raw("- ")
			case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
				w.newline(2)
				w.raw(strings.Repeat("#", int(name[1]-'0')) + " ")
			case atom.Pre:
				pre++
				w.newline(2)
			case atom.Td, atom.Th:
				w.raw(" | ")
			case atom.Img:
				if alt := attr(z, hasAttr, "alt"); alt != "" {
					w.text("[image: "+truncate(alt, 200)+"]", false)
				}
			case atom.A:
				href = resolveLink(base, attr(z, hasAttr, "href"))
			default:
				if block[a] {
					w.newline(2)
				}
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			if len(skip) > 0 {
				for i := len(skip) - 1; i >= 0; i-- {
					if skip[i] == a {
						skip = skip[:i]
						break
					}
				}
				continue
			}
			switch {
			case a == atom.Title:
				inTitle = false
			case a == atom.A:
				if href != "" {
					w.text(" <"+href+">", false)
					href = ""
				}
			case a == atom.Pre:
				pre = max(pre-1, 0)
				w.newline(2)
			case a == atom.Li || a == atom.Tr:
				w.newline(1)
			case block[a] || a == atom.H1 || a == atom.H2 || a == atom.H3 || a == atom.H4 || a == atom.H5 || a == atom.H6:
				w.newline(2)
			}
		}
	}
	return strings.TrimSpace(title), w.String()
}

// skipped elements hold no readable text.
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true, atom.Svg: true, atom.Math: true,
	atom.Iframe: true, atom.Object: true, atom.Embed: true, atom.Canvas: true, atom.Select: true, atom.Button: true,
	atom.Textarea: true, atom.Audio: true, atom.Video: true, atom.Map: true,
}

var voidElement = map[atom.Atom]bool{atom.Embed: true}

var block = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true, atom.Header: true, atom.Footer: true,
	atom.Nav: true, atom.Aside: true, atom.Main: true, atom.Ul: true, atom.Ol: true, atom.Dl: true, atom.Dt: true,
	atom.Dd: true, atom.Table: true, atom.Tr: true, atom.Blockquote: true, atom.Figure: true, atom.Figcaption: true,
	atom.Form: true, atom.Fieldset: true, atom.Address: true, atom.Details: true, atom.Summary: true, atom.Caption: true,
	atom.Body: true, atom.Html: true,
}

func attr(z *html.Tokenizer, more bool, want string) string {
	for more {
		var k, v []byte
		k, v, more = z.TagAttr()
		if string(k) == want {
			return string(v)
		}
	}
	return ""
}

// resolveLink is an http(s) link's absolute address, or "" for anything
// else (javascript:, mailto:, fragments of the same page).
func resolveLink(base *url.URL, href string) string {
	href = strings.TrimSpace(href)
	if href == "" || strings.HasPrefix(href, "#") {
		return ""
	}
	u, err := url.Parse(href)
	if err != nil {
		return ""
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return ""
	}
	return truncate(u.String(), 300)
}

// textWriter collapses whitespace as a browser does (but in pre) and
// keeps at most two line breaks in a row, within limit bytes.
type textWriter struct {
	b        strings.Builder
	limit    int
	newlines int  // trailing line breaks written
	space    bool // a space is owed before the next text
}

func (w *textWriter) full() bool { return w.b.Len() >= w.limit }

func (w *textWriter) write(s string) {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if room := w.limit - w.b.Len(); len(s) > room {
		for room > 0 && !utf8.RuneStart(s[room]) {
			room--
		}
		s = s[:max(room, 0)]
	}
	w.b.WriteString(s)
}

func (w *textWriter) raw(s string) {
	w.space = false
	w.write(s)
	w.newlines = 0
}

func (w *textWriter) text(s string, pre bool) {
	if pre {
		w.write(s)
		w.newlines = len(s) - len(strings.TrimRight(s, "\n"))
		return
	}
	lead := s != "" && isSpace(s[0])
	fields := strings.Fields(s)
	if len(fields) == 0 {
		if lead && w.b.Len() > 0 && w.newlines == 0 {
			w.space = true
		}
		return
	}
	if (lead || w.space) && w.b.Len() > 0 && w.newlines == 0 {
		w.write(" ")
	}
	w.write(strings.Join(fields, " "))
	w.newlines = 0
	w.space = isSpace(s[len(s)-1])
}

func (w *textWriter) newline(n int) {
	w.space = false
	if w.b.Len() == 0 {
		return
	}
	for w.newlines < n {
		w.write("\n")
		w.newlines++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

func (w *textWriter) String() string { return strings.TrimSpace(w.b.String()) }
