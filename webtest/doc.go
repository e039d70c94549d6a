// Package webtest drives the web app (package web) end to end: a real
// gateway with the model backend pointed at a fake OpenAI server, Debian's
// Chromium headless, driven over the DevTools protocol with chromedp. The
// tests pair, chat, answer an approval, upload and download files, search,
// and go offline and back; they save screenshots at phone and desktop
// width, light and dark, under testdata/artifacts/webtest/.
//
// Without a Chromium the tests skip, unless CI is set: then they fail.
package webtest
