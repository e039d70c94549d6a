// Package web is the Iris web app: plain JavaScript modules and CSS,
// embedded in the binary and served at /. It speaks Iris v1 over the
// gateway's own /ws, like any other device. There is no build step: the
// files under static/ are what the browser runs.
//
// The service worker (/sw.js) is generated at start-up: its cache is named
// after a hash of every embedded file and it lists them as the app shell,
// so a new build replaces the cached shell and an old one keeps working
// offline.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"sync"
	"time"
)

//go:embed all:static
var files embed.FS

// asset is one file ready to serve.
type asset struct {
	data  []byte
	etag  string
	ctype string
}

var (
	once    sync.Once
	assets  map[string]*asset // by URL path, "/" for index.html
	version string
)

// types the standard library may not know on every system.
var types = map[string]string{
	".html":        "text/html; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".svg":         "image/svg+xml",
	".png":         "image/png",
	".webmanifest": "application/manifest+json",
	".json":        "application/json",
}

func load() {
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(err)
	}
	assets = make(map[string]*asset)
	var names []string
	sum := sha256.New()
	err = fs.WalkDir(static, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == "sw.js" {
			return err
		}
		data, err := fs.ReadFile(static, p)
		if err != nil {
			return err
		}
		names = append(names, p)
		h := sha256.Sum256(data)
		sum.Write([]byte(p))
		sum.Write(h[:])
		assets["/"+p] = &asset{data: data, etag: `"` + hex.EncodeToString(h[:8]) + `"`, ctype: types[path.Ext(p)]}
		return nil
	})
	if err != nil {
		panic(err)
	}
	sort.Strings(names)
	version = hex.EncodeToString(sum.Sum(nil)[:6])
	// The shell the service worker caches: "./" is index.html.
	shell := []string{"./"}
	for _, n := range names {
		if n != "index.html" {
			shell = append(shell, n)
		}
	}
	list, _ := json.Marshal(shell)
	sw, err := fs.ReadFile(static, "sw.js")
	if err != nil {
		panic(err)
	}
	sw = bytes.Replace(sw, []byte(`"__VERSION__"`), []byte(`"`+version+`"`), 1)
	sw = bytes.Replace(sw, []byte(`["__SHELL__"]`), list, 1)
	h := sha256.Sum256(sw)
	assets["/sw.js"] = &asset{data: sw, etag: `"` + hex.EncodeToString(h[:8]) + `"`, ctype: types[".js"]}
	assets["/"] = assets["/index.html"]
	delete(assets, "/index.html")
}

// Version names the embedded build of the app (the service worker's cache).
func Version() string {
	once.Do(load)
	return version
}

// csp keeps the page to its own scripts and styles. connect-src allows any
// WebSocket: the person may pair with a gateway on another host.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"media-src 'self' blob:; connect-src 'self' ws: wss: blob:; worker-src 'self'; manifest-src 'self'; " +
	"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

// Handler serves the app. Mount it at "GET /": paths it does not know are
// 404. Every response is revalidated (ETag), so an update reaches the
// browser on its next load; offline, the service worker answers.
func Handler() http.Handler {
	once.Do(load)
	modtime := time.Now()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := assets[r.URL.Path]
		if a == nil {
			http.NotFound(w, r)
			return
		}
		hd := w.Header()
		hd.Set("ETag", a.etag)
		hd.Set("Cache-Control", "no-cache")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		if a.ctype != "" {
			hd.Set("Content-Type", a.ctype)
		}
		if r.URL.Path == "/" {
			hd.Set("Content-Security-Policy", csp)
		}
		http.ServeContent(w, r, path.Base(r.URL.Path), modtime, bytes.NewReader(a.data))
	})
}
