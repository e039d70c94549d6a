package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/irisgate/irisgate/internal/testgw"
)

// TestPairingLinkPairsTheWebApp opens a pairing link, as pair and the
// banner print it, in headless Chromium: the web app's pairing screen
// comes up with the gateway and the token filled in, and one click pairs
// it. Without Chromium it is skipped (failed under CI, which installs it,
// as for webtest/).
func TestPairingLinkPairsTheWebApp(t *testing.T) {
	path := os.Getenv("CHROMIUM")
	if path == "" {
		for _, n := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
			if p, err := exec.LookPath(n); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Chromium for the pairing link test (apt-get install chromium; .ci/run does)")
		}
		t.Skip("no Chromium: the pairing link is not opened in a browser")
	}
	g := testgw.Start(t)
	nt, _, err := createToken(context.Background(), dataFlag{Data: g.Dir}, "browser", "")
	tok := nt.Value
	if err != nil {
		t.Fatal(err)
	}
	web := "http://" + g.Addr + "/"
	link := pairLink(web, tok)

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true))
	defer cancelAlloc()
	bctx, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting Chromium (%s): %v", path, err)
	}
	ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()

	if err := chromedp.Do(ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#pair-token"))); err != nil {
		t.Fatalf("opening %s: %v", link, err)
	}
	url, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#pair-url")))
	if err != nil {
		t.Fatal(err)
	}
	token, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#pair-token")))
	if err != nil {
		t.Fatal(err)
	}
	if url != wsOf(web) || token != tok {
		t.Fatalf("the pairing screen shows url %q token %q, want %q and the new token", url, token, wsOf(web))
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`form.pair-form button[type=submit]`))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`document.querySelector('.conn-dot')?.dataset.state === 'online'`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the web app did not come online after pairing through the link: %v", err)
	}
	paired, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(JSON.parse(localStorage.getItem('iris.pairing') || 'null') || {}).token || ''`))
	if err != nil {
		t.Fatal(err)
	}
	if paired != tok {
		t.Errorf("the web app kept token %q, want the link's", paired)
	}
	if hash, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash`)); strings.Contains(hash, tok) {
		t.Errorf("the token stays in the address bar after pairing: %q", hash)
	}
}
