package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/makiuchi-d/gozxing"
	zxqr "github.com/makiuchi-d/gozxing/qrcode"

	"github.com/irisgate/irisgate/internal/testgw"
)

var lan = []netip.Addr{netip.MustParseAddr("192.168.1.23"), netip.MustParseAddr("10.0.0.5")}

const firstTok = "igt_0123456789abcdef0123456789abcdef0123456789abcdef"

// webPairParams reads a pairing link as the web app does
// (web/static/js/main.js: new URLSearchParams(location.hash.replace(/^#\/?pair\??/, ”))).
func webPairParams(t *testing.T, link string) (page string, params url.Values) {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatalf("pairing link %q: %v", link, err)
	}
	hash := "#" + u.EscapedFragment()
	rest := regexp.MustCompile(`^#/?pair\??`).ReplaceAllString(hash, "")
	if rest == hash {
		t.Fatalf("pairing link %q: the fragment does not open the pairing screen", link)
	}
	params, err = url.ParseQuery(rest)
	if err != nil {
		t.Fatalf("pairing link %q: %v", link, err)
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String(), params
}

func TestBannerNamesWebAppLANAndPairingLink(t *testing.T) {
	r, err := reachOf("[::]:8787", "", lan)
	if err != nil {
		t.Fatal(err)
	}
	b := banner{Reach: r, Version: "v1.2.0", CLI: "go run ./cmd/irisgate", Token: firstTok}
	text := b.text()
	for _, want := range []string{
		"irisgate v1.2.0 is ready.",
		"Web app:          http://localhost:8787/\n",
		"On your network:  http://192.168.1.23:8787/  http://10.0.0.5:8787/\n",
		"Apps connect to:  ws://192.168.1.23:8787/ws\n",
		"    " + firstTok + "\n",
		"Chat from this terminal:    go run ./cmd/irisgate chat --token " + firstTok + "\n",
		"Pair another device later:  go run ./cmd/irisgate pair\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the banner lacks %q:\n%s", want, text)
		}
	}
	link := regexp.MustCompile(`(?m)^    (http://\S+#pair\S+)$`).FindStringSubmatch(text)
	if link == nil {
		t.Fatalf("no pairing link on a line of its own:\n%s", text)
	}
	page, p := webPairParams(t, link[1])
	if page != "http://192.168.1.23:8787/" || p.Get("url") != "ws://192.168.1.23:8787/ws" || p.Get("token") != firstTok {
		t.Errorf("the pairing link %s opens %s with url=%q token=%q", link[1], page, p.Get("url"), p.Get("token"))
	}
	if got := decodeTerminalQR(t, text, false); got != link[1] {
		t.Errorf("the banner's QR code reads %q, want the pairing link %q", got, link[1])
	}

	// Another data directory and port: the commands say so.
	r, _ = reachOf("0.0.0.0:9000", "", append(lan, netip.MustParseAddr("fd00::7")))
	b = banner{Reach: r, Version: "devel", CLI: "irisgate", Data: "/srv/iris data", Token: firstTok}
	text = b.text()
	for _, want := range []string{
		"On your network:  http://192.168.1.23:9000/  http://10.0.0.5:9000/\n", // 0.0.0.0 takes no IPv6
		"irisgate chat --url ws://localhost:9000/ws --token " + firstTok,
		"irisgate pair --data '/srv/iris data'\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the banner lacks %q:\n%s", want, text)
		}
	}

	// Loopback only: no LAN address, and it says how to let phones in.
	r, _ = reachOf("127.0.0.1:8787", "", lan)
	text = banner{Reach: r, Version: "devel", CLI: "irisgate", Token: firstTok}.text()
	if strings.Contains(text, "192.168.1.23") || !strings.Contains(text, "Only this machine can connect") ||
		!strings.Contains(text, "http://127.0.0.1:8787/#pair?") {
		t.Errorf("the loopback banner:\n%s", text)
	}

	// Behind a proxy the link names the public address.
	r, err = reachOf("127.0.0.1:8787", "https://iris.example.com/app", lan)
	if err != nil {
		t.Fatal(err)
	}
	text = banner{Reach: r, Version: "devel", CLI: "irisgate", Token: firstTok}.text()
	link = regexp.MustCompile(`(?m)^    (https://\S+#pair\S+)$`).FindStringSubmatch(text)
	if link == nil {
		t.Fatalf("no public pairing link:\n%s", text)
	}
	if page, p := webPairParams(t, link[1]); page != "https://iris.example.com/app/" || p.Get("url") != "wss://iris.example.com/app/ws" {
		t.Errorf("the public pairing link opens %s with url=%q", page, p.Get("url"))
	}
	if _, err := reachOf(":8787", "iris.example.com", lan); err == nil {
		t.Error("a public URL without a scheme was taken")
	}

	// In a container the LAN addresses are the container's: none are
	// offered, and the banner says how to name the right one.
	r, _ = reachOf("[::]:8787", "", nil)
	r.Container = true
	text = banner{Reach: r, Version: "devel", CLI: "docker compose exec irisgate irisgate", Token: firstTok}.text()
	if strings.Contains(text, "On your network") || !strings.Contains(text, "IRISGATE_PUBLIC_URL") ||
		!strings.Contains(text, "docker compose exec irisgate irisgate pair\n") {
		t.Errorf("the container banner:\n%s", text)
	}

	// A later start shows the addresses and how to pair, but no token.
	r, _ = reachOf("[::]:8787", "", lan)
	text = banner{Reach: r, Version: "devel", CLI: "./irisgate"}.text()
	if strings.Contains(text, "igt_") || strings.Contains(text, "#pair") || !strings.Contains(text, "Pair a phone or a browser:  ./irisgate pair\n") {
		t.Errorf("a later start's banner:\n%s", text)
	}
}

func TestLANAddrsSkipLoopbackBridgesAndLinkLocal(t *testing.T) {
	a := netip.MustParseAddr
	got := lanAddrs([]iface{
		{Name: "lo", Up: false, Addrs: []netip.Addr{a("127.0.0.1"), a("::1")}},
		{Name: "docker0", Up: true, Addrs: []netip.Addr{a("172.17.0.1")}},
		{Name: "veth12ab", Up: true, Addrs: []netip.Addr{a("172.18.0.1")}},
		{Name: "tailscale0", Up: true, Addrs: []netip.Addr{a("100.101.102.103")}},
		{Name: "eth0", Up: true, Addrs: []netip.Addr{a("10.0.0.5"), a("fe80::1"), a("fd00::5")}},
		{Name: "wlan0", Up: true, Addrs: []netip.Addr{a("169.254.3.4"), a("192.168.1.23")}},
		{Name: "eth1", Up: false, Addrs: []netip.Addr{a("192.168.9.9")}},
	})
	want := []netip.Addr{a("192.168.1.23"), a("10.0.0.5"), a("100.101.102.103"), a("fd00::5")}
	if len(got) != len(want) {
		t.Fatalf("lanAddrs = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lanAddrs = %v, want %v", got, want)
		}
	}
	_ = lanAddrs(hostIfaces()) // this machine's, whatever they are: no panic
}

func TestCLINameMatchesHowItWasStarted(t *testing.T) {
	none := func(string) string { return "" }
	found := func(string) string { return "/usr/local/bin/irisgate" }
	for _, c := range []struct {
		exe, arg0 string
		checkout  bool
		onPath    func(string) string
		want      string
	}{
		{"/tmp/go-build123/b001/exe/irisgate", "/tmp/go-build123/b001/exe/irisgate", true, none, "go run ./cmd/irisgate"},
		{"/tmp/go-build123/b001/exe/irisgate", "/tmp/go-build123/b001/exe/irisgate", false, none, "go run github.com/irisgate/irisgate/cmd/irisgate@latest"},
		{"/home/me/go/bin/irisgate", "irisgate", false, none, "irisgate"},
		{"/usr/local/bin/irisgate", "/usr/local/bin/irisgate", false, found, "irisgate"},
		{"/home/me/src/irisgate/irisgate", "./irisgate", true, none, "./irisgate"},
		{"/opt/my apps/irisgate", "/opt/my apps/irisgate", false, none, "'/opt/my apps/irisgate'"},
	} {
		if got := cliNameFor(c.exe, c.arg0, c.checkout, c.onPath); got != c.want {
			t.Errorf("cliNameFor(%q, %q, %v) = %q, want %q", c.exe, c.arg0, c.checkout, got, c.want)
		}
	}
}

func TestWeakToken(t *testing.T) {
	for tok, weak := range map[string]bool{
		"mysecret":                       true, // short
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": true, // long, but one letter
		"passwordpasswordpassword":       true, // a word, repeated
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": false,
		firstTok:                           false,
		"J8v2Xq9LmZ4tR7wB1nK6cH3sD5fG0pYa": false, // base64-ish, 32 characters
	} {
		why := weakToken(tok)
		if (why != "") != weak {
			t.Errorf("weakToken(%q) = %q, want weak=%v", tok, why, weak)
		}
	}
	if why := weakToken("mysecret"); !strings.Contains(why, "8 characters") {
		t.Errorf("weakToken(mysecret) = %q, want it to say it is 8 characters", why)
	}
}

// decodeTerminalQR finds the QR code drawn in text (half blocks, as
// renderQR draws them), paints it as a terminal shows it and reads it
// with ZXing's decoder: what a phone's camera would see.
func decodeTerminalQR(t *testing.T, text string, ansi bool) string {
	t.Helper()
	var rows []string
	for _, l := range strings.Split(text, "\n") {
		// The banner's indent comes before the colour; inside it a light
		// module pair is a space too.
		l = strings.TrimPrefix(l, "    ")
		l = regexp.MustCompile(`\x1b\[[0-9;]*m`).ReplaceAllString(l, "")
		if strings.ContainsAny(l, "█▀▄") {
			rows = append(rows, l)
		} else if len(rows) > 0 {
			break
		}
	}
	if len(rows) == 0 {
		t.Fatalf("no QR code in:\n%s", text)
	}
	// Each character is two modules, top and bottom; ink is the
	// terminal's foreground.
	var mods [][]bool // true: ink
	for _, r := range rows {
		top, bottom := []bool{}, []bool{}
		for _, c := range r {
			top = append(top, c == '█' || c == '▀')
			bottom = append(bottom, c == '█' || c == '▄')
		}
		mods = append(mods, top, bottom)
	}
	// The code is square: a half line below an odd size is background.
	if w := len(mods[0]); len(mods) > w {
		mods = mods[:w]
	}
	// A dark terminal with light ink, or black ink on the white the ANSI
	// code paints. Around it, light: ZXing reads it as a pure barcode (an
	// upright grid, as a terminal draws it), because gozxing's finder-
	// pattern detector misjudges the size of about 1 in 150 version-6
	// codes that zbarimg and PURE_BARCODE read correctly.
	inkC, paperC, bgC := color.Gray{255}, color.Gray{0}, color.Gray{255}
	if ansi {
		inkC, paperC = color.Gray{0}, color.Gray{255}
	}
	const scale, margin = 6, 24
	w, h := len(mods[0])*scale+2*margin, len(mods)*scale+2*margin
	img := image.NewGray(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetGray(x, y, bgC)
		}
	}
	for my, row := range mods {
		for mx, ink := range row {
			c := paperC
			if ink {
				c = inkC
			}
			for dy := 0; dy < scale; dy++ {
				for dx := 0; dx < scale; dx++ {
					img.SetGray(margin+mx*scale+dx, margin+my*scale+dy, c)
				}
			}
		}
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := zxqr.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
	if err != nil {
		t.Fatalf("ZXing cannot read the QR code (ansi=%v): %v\n%s", ansi, err, strings.Join(rows, "\n"))
	}
	return res.GetText()
}

func TestQRCodeReadsBackInBothStyles(t *testing.T) {
	link := pairLink("http://192.168.1.23:8787/", firstTok)
	bits, err := qrMatrix(link)
	if err != nil {
		t.Fatal(err)
	}
	for _, ansi := range []bool{false, true} {
		if got := decodeTerminalQR(t, renderQR(bits, ansi), ansi); got != link {
			t.Errorf("ansi=%v: the code reads %q, want %q", ansi, got, link)
		}
	}
	// Many links, as tokens and ports vary: every mask and layout the
	// encoder picks must read back.
	for i := range 100 {
		var b [24]byte
		rand.Read(b[:])
		link := pairLink(fmt.Sprintf("http://192.168.%d.%d:%d/", i%3, i, 8000+i*7), "igt_"+hex.EncodeToString(b[:]))
		bits, err := qrMatrix(link)
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeTerminalQR(t, renderQR(bits, i%2 == 0), i%2 == 0); got != link {
			t.Fatalf("i=%d: the code reads %q, want %q", i, got, link)
		}
	}
	// Small enough for an 80-column terminal.
	if w := len(bits) + 2*qrQuiet; w > 72 {
		t.Errorf("the code is %d characters wide", w)
	}
}

// TestServeFirstStartBanner runs serve as people do: the first start
// prints the addresses, the token, the pairing link and its QR code on
// stderr, and that token admits a device.
func TestServeFirstStartBanner(t *testing.T) {
	dir := t.TempDir()
	p := startServe(t, dir, nil)
	p.stderr.waitFor(t, "Pair another device later:")
	p.stop(t)
	text := strings.Join(p.stderr.snapshot(), "\n")
	link := regexp.MustCompile(`(?m)^    (http://127\.0\.0\.1:\d+/#pair\S+)$`).FindStringSubmatch(text)
	if link == nil {
		t.Fatalf("no pairing link in the first start's output:\n%s", text)
	}
	if got := decodeTerminalQR(t, text, false); got != link[1] {
		t.Errorf("the printed QR code reads %q, want %q", got, link[1])
	}
	_, params := webPairParams(t, link[1])
	if !strings.Contains(text, "Chat from this terminal:    ") || !strings.Contains(text, "pair\n") {
		t.Errorf("the banner suggests no commands:\n%s", text)
	}
	if out := strings.Join(p.stdout.snapshot(), "\n"); out != "" {
		t.Errorf("serve wrote to stdout: %q", out)
	}

	// The token works against that data directory.
	g := testgw.StartIn(t, filepath.Join(dir, "irisgate-data"))
	if _, err := g.DialErr(t, "phone", params.Get("token")); err != nil {
		t.Errorf("the first start's token does not admit a device: %v", err)
	}
}

// TestServeJSONLogStaysJSON: with --log-format json every line serve
// writes is a JSON object, the banner included, and a weak fixed token
// is warned about.
func TestServeJSONLogStaysJSON(t *testing.T) {
	dir := t.TempDir()
	// --log-level error: the first start's token is written all the same.
	p := startServe(t, dir, nil, "--log-format", "json", "--log-level", "error")
	p.stderr.waitFor(t, "first start")
	p.stop(t)
	recs := jsonLines(t, append(p.stderr.snapshot(), p.stdout.snapshot()...))
	var first map[string]any
	for _, r := range recs {
		if strings.HasPrefix(r["msg"].(string), "first start") {
			first = r
		}
	}
	if first == nil {
		t.Fatalf("no first-start record in %v", recs)
	}
	tok, _ := first["token"].(string)
	link, _ := first["pair_url"].(string)
	if _, params := webPairParams(t, link); !strings.HasPrefix(tok, "igt_") || params.Get("token") != tok {
		t.Errorf("first-start record: token %q, pair_url %q", tok, link)
	}

	// A weak IRISGATE_TOKEN: a warning, as JSON too. With a fixed token
	// no stored one is made, so there is no first-start token either.
	p = startServe(t, t.TempDir(), []string{"IRISGATE_TOKEN=mysecret"}, "--log-format", "json")
	p.stderr.waitFor(t, `"msg":"ready"`)
	p.stop(t)
	warned := false
	for _, r := range jsonLines(t, p.stderr.snapshot()) {
		msg, _ := r["msg"].(string)
		if r["level"] == "WARN" && strings.Contains(msg, "weak") && strings.Contains(msg, "8 characters") {
			warned = true
		}
		if strings.Contains(msg, "mysecret") || r["token"] != nil {
			t.Errorf("the log shows the fixed token: %v", r)
		}
	}
	if !warned {
		t.Errorf("no warning about the weak token:\n%s", strings.Join(p.stderr.snapshot(), "\n"))
	}

	// A strong one: no warning.
	p = startServe(t, t.TempDir(), []string{"IRISGATE_TOKEN=" + firstTok}, "--log-format", "json")
	p.stderr.waitFor(t, `"msg":"ready"`)
	p.stop(t)
	if s := strings.Join(p.stderr.snapshot(), "\n"); strings.Contains(s, "weak") {
		t.Errorf("a strong token was called weak:\n%s", s)
	}
}

func jsonLines(t *testing.T, ls []string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range ls {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("not a JSON line: %q", l)
			continue
		}
		out = append(out, rec)
	}
	return out
}

// TestPairMakesANewTokenEachTime: each pair prints a fresh token in a
// link that opens the web app, and the token admits a device; --device
// binds it.
func TestPairMakesANewTokenEachTime(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "irisgate-data")
	var toks []string
	for range 2 {
		// --data: admin commands make no data directory they were not told of.
		out, errOut := runIrisgate(t, dir, nil, "pair", "--data", data, "--listen", "127.0.0.1:8787")
		if !strings.Contains(errOut, "created tok_") {
			t.Errorf("pair's stderr: %q", errOut)
		}
		link := regexp.MustCompile(`(?m)^    (http://127\.0\.0\.1:8787/#pair\S+)$`).FindStringSubmatch(out)
		if link == nil {
			t.Fatalf("pair printed no link:\n%s", out)
		}
		if got := decodeTerminalQR(t, out, false); got != link[1] {
			t.Errorf("pair's QR code reads %q, want %q", got, link[1])
		}
		_, params := webPairParams(t, link[1])
		if params.Get("url") != "ws://127.0.0.1:8787/ws" {
			t.Errorf("pair's link names %q", params.Get("url"))
		}
		toks = append(toks, params.Get("token"))
	}
	if toks[0] == toks[1] || toks[0] == "" {
		t.Fatalf("two pairs gave tokens %q", toks)
	}
	out, _ := runIrisgate(t, dir, nil, "pair", "--device", "kitchen-tablet", "--name", "kitchen")
	bound := regexp.MustCompile(`igt_[0-9a-f]+`).FindString(out)
	if bound == "" || strings.Contains(out, "#pair") || !strings.Contains(out, `bound to device "kitchen-tablet"`) {
		t.Fatalf("pair --device printed:\n%s", out)
	}
	list, _ := runIrisgate(t, dir, nil, "token", "list")
	if !strings.Contains(list, "kitchen") || strings.Count(list, "paired ") != 2 {
		t.Errorf("token list after three pairs:\n%s", list)
	}

	g := testgw.StartIn(t, data)
	for _, tok := range toks {
		if _, err := g.DialErr(t, "phone-"+tok[len(tok)-4:], tok); err != nil {
			t.Errorf("a paired token does not admit a device: %v", err)
		}
	}
	if _, err := g.DialErr(t, "kitchen-tablet", bound); err != nil {
		t.Errorf("the bound token does not admit its device: %v", err)
	}
	if _, err := g.DialErr(t, "someone-else", bound); err == nil {
		t.Error("the bound token admitted another device")
	}
}

// TestWebAppForLinks: links a device opens (an ntfy tap) name the web app
// at the address pairing links do; in a container without --public-url no
// address is known, and none is named.
func TestWebAppForLinks(t *testing.T) {
	lan := []netip.Addr{netip.MustParseAddr("192.168.1.23")}
	r, _ := reachOf(":8787", "", lan)
	if got := r.webApp(); got != "http://192.168.1.23:8787/" {
		t.Fatalf("web app %q", got)
	}
	r, _ = reachOf(":8787", "https://iris.example.com", lan)
	if got := r.webApp(); got != "https://iris.example.com/" {
		t.Fatalf("web app %q", got)
	}
	r, _ = reachOf(":8787", "", nil)
	r.Container = true
	if got := r.webApp(); got != "" {
		t.Fatalf("web app in a container %q", got)
	}
}
