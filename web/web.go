// Package web serves the browser dashboard: the bundle that web/build.mjs
// builds from web/src into web/dist, embedded in the binary so `go build`
// needs no Node and the dashboard works offline.
//
// It owns the static file handler only: a strict Content-Security-Policy
// (scripts and styles from this origin alone, no inline script, no eval,
// connections to this origin only), caching (index.html is revalidated,
// content-hashed assets are immutable), and the routing that keeps every
// other path for the API. It imports the standard library only; the
// dashboard reaches the core through the HTTP API and the stream, like
// any other client.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed dist
var dist embed.FS

// CSP is the Content-Security-Policy of every dashboard response. 'self'
// in connect-src covers the same-origin WebSocket (ws: and wss: match
// 'self' in CSP Level 3, as Chromium implements it).
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// AssetPrefix is the path under which the bundle's files are served.
const AssetPrefix = "/assets/"

// Handler serves the dashboard in front of next: GET and HEAD of "/" (and
// "/index.html") answer the page, GET and HEAD of an existing file under
// /assets/ answer that file, and every other request goes to next (the
// API, whose routes are therefore never shadowed).
func Handler(next http.Handler) http.Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic("web: dist missing from the embedded files: " + err.Error()) // impossible: go:embed checked it
	}
	h := &handler{files: sub, next: next, etags: map[string]string{}}
	_ = fs.WalkDir(sub, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		h.etags[name] = `"` + hex.EncodeToString(sum[:12]) + `"`
		return nil
	})
	return h
}

type handler struct {
	files fs.FS
	next  http.Handler
	etags map[string]string // file name -> strong ETag (content hash)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.next.ServeHTTP(w, r)
		return
	}
	switch p := r.URL.Path; {
	case p == "/" || p == "/index.html":
		h.serve(w, r, "index.html", "no-cache")
	case strings.HasPrefix(p, AssetPrefix):
		name := strings.TrimPrefix(p, "/")
		clean := path.Clean(name)
		if clean != name || !fs.ValidPath(name) || !isFile(h.files, name) {
			h.next.ServeHTTP(w, r)
			return
		}
		h.serve(w, r, name, "public, max-age=31536000, immutable")
	default:
		h.next.ServeHTTP(w, r)
	}
}

func isFile(fsys fs.FS, name string) bool {
	st, err := fs.Stat(fsys, name)
	return err == nil && st.Mode().IsRegular()
}

// serve writes one embedded file with the security headers. The bundle's
// names carry a content hash, so assets never change under a URL;
// index.html must be revalidated to pick up a new build.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, name, cache string) {
	b, err := fs.ReadFile(h.files, name)
	if err != nil {
		http.Error(w, "dashboard file missing: "+name, http.StatusNotFound)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	hd.Set("Cache-Control", cache)
	if tag := h.etags[name]; tag != "" {
		hd.Set("ETag", tag)
	}
	// http.ServeContent sets the type from the extension, answers HEAD,
	// Range and If-None-Match (a revalidated index.html costs a 304).
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}
