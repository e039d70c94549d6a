package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"strings"
	"time"
)

// pairLink is the web app address that opens its pairing screen with the
// gateway and the token filled in. The web app reads them from the
// fragment (web/static/js/main.js: "#pair?url=…&token=…"), which a browser
// never sends to a server: the token stays out of access logs and proxies.
// The WebSocket address is spelled out rather than left to the page's
// default, which prefers the last gateway that browser paired with.
func pairLink(web, token string) string {
	q := url.Values{"url": {wsOf(web)}, "token": {token}}
	return strings.TrimSuffix(web, "#") + "#pair?" + q.Encode()
}

// banner is what serve tells a person on start-up.
type banner struct {
	Reach   reach
	Version string
	Data    string // --data, when not the default: the commands suggested need it
	CLI     string // how to run irisgate here (cliName)
	// Token is the device token made on the first start, shown once.
	Token string
	// FixedToken says devices use the --token / IRISGATE_TOKEN the person set.
	FixedToken bool
	Color      bool // ANSI colour for the QR code
}

func (b banner) cmd(sub string) string {
	s := b.CLI + " " + sub
	if b.Data != "" {
		s += " --data " + shellQuote(b.Data)
	}
	return s
}

// chatCmd is the terminal chat's command line for the first token.
func (b banner) chatCmd() string {
	s := b.CLI + " chat"
	if ws := wsOf(b.Reach.Local); ws != defaultChatURL {
		s += " --url " + ws
	}
	return s + " --token " + b.Token
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t'\"$\\`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// text is the banner for a terminal or a text log.
func (b banner) text() string {
	var w strings.Builder
	r := b.Reach
	fmt.Fprintf(&w, "\nirisgate %s is ready.\n\n", b.Version)
	fmt.Fprintf(&w, "  Web app:          %s\n", r.Local)
	switch {
	case r.Container:
		w.WriteString("  In a container, the gateway cannot see your machine's network address: use it in place of localhost,\n" +
			"  and set IRISGATE_PUBLIC_URL (http://192.168.1.23:8787/, say) so pairing links name it.\n")
	case r.LoopbackOnly:
		w.WriteString("  Only this machine can connect (listening on loopback); --listen :PORT lets phones on your network in.\n")
	case len(r.LAN) > 0:
		fmt.Fprintf(&w, "  On your network:  %s\n", strings.Join(r.LAN, "  "))
	}
	if r.Pair != r.Local && !contains(r.LAN, r.Pair) {
		fmt.Fprintf(&w, "  Public address:   %s\n", r.Pair)
	}
	fmt.Fprintf(&w, "  Apps connect to:  %s\n", wsOf(r.Pair))
	if b.Token == "" {
		if b.FixedToken {
			w.WriteString("\nDevices pair with the fixed token you set (--token / IRISGATE_TOKEN).\n")
		}
		fmt.Fprintf(&w, "\nPair a phone or a browser:  %s\n\n", b.cmd("pair"))
		return w.String()
	}
	link := pairLink(r.Pair, b.Token)
	fmt.Fprintf(&w, "\nFirst start: a device token was made. It is shown only this once:\n\n    %s\n\n", b.Token)
	fmt.Fprintf(&w, "Pair your phone: point its camera at this code, or open the link on it.\n\n    %s\n\n", link)
	if bits, err := qrMatrix(link); err == nil {
		w.WriteString(indentBlock(renderQR(bits, b.Color), "    "))
		w.WriteString("\n")
	}
	fmt.Fprintf(&w, "Chat from this terminal:    %s\n", b.chatCmd())
	fmt.Fprintf(&w, "Pair another device later:  %s\n\n", b.cmd("pair"))
	return w.String()
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func indentBlock(s, pad string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(pad + l)
		}
	}
	return b.String()
}

// show tells the banner: as text on w, or, when the log is JSON, as log
// records, so a log shipper reading w sees nothing but JSON lines (the QR
// code is left out there: `irisgate pair` prints one on a terminal). The
// records are written whatever --log-level says, as the text banner is: a
// first start's token is shown once.
func (b banner) show(w io.Writer, log *slog.Logger, jsonLog bool) {
	if !jsonLog {
		io.WriteString(w, b.text())
		return
	}
	emit := func(msg string, args ...any) {
		r := slog.NewRecord(time.Now(), slog.LevelInfo, msg, 0)
		r.Add(args...)
		log.Handler().Handle(context.Background(), r)
	}
	r := b.Reach
	if r.LAN == nil {
		r.LAN = []string{} // [] rather than null for whoever reads the log
	}
	emit("ready", "web", r.Local, "lan", r.LAN, "ws", wsOf(r.Pair), "loopback_only", r.LoopbackOnly, "container", r.Container,
		"pair_command", b.cmd("pair"))
	if b.Token != "" {
		emit("first start: a device token was made; it is shown only this once",
			"token", b.Token, "pair_url", pairLink(r.Pair, b.Token),
			"chat_command", b.chatCmd())
	}
}

// weakToken says why a fixed token is easy to guess, or "" when it is not.
// The lockout (ten failures a minute per address) slows one guesser, not a
// botnet, and not a proxy that makes everyone one address.
func weakToken(tok string) string {
	n := len([]rune(tok))
	bits := entropyBits(tok)
	switch {
	case n < 16:
		return fmt.Sprintf("it is %d characters long (about %.0f bits of randomness)", n, bits)
	case bits < 64:
		return fmt.Sprintf("it has about %.0f bits of randomness", bits)
	}
	return ""
}

// entropyBits estimates a string's randomness from the frequency of its
// characters (Shannon), counting a string that repeats itself
// ("passwordpassword") only once: a run of one character or a repeated
// word scores low. It cannot see a dictionary word, so short tokens are
// refused on length alone.
func entropyBits(s string) float64 {
	rs := []rune(s)
	for p := 1; p < len(rs); p++ {
		if repeats(rs, p) {
			rs = rs[:p]
			break
		}
	}
	counts := map[rune]int{}
	n := len(rs)
	for _, r := range rs {
		counts[r]++
	}
	var h float64
	for _, c := range counts {
		p := float64(c) / float64(n)
		h -= p * math.Log2(p)
	}
	return h * float64(n)
}

// repeats says rs is its first p runes over and over (the last time
// perhaps cut short).
func repeats(rs []rune, p int) bool {
	for i := p; i < len(rs); i++ {
		if rs[i] != rs[i-p] {
			return false
		}
	}
	return true
}
