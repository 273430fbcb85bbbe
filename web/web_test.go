package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// api stands in for the API: it answers every request it gets with 418
// so a test sees which requests fell through.
var api = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusTeapot)
})

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestRootServesThePageWithAStrictCSP(t *testing.T) {
	h := Handler(api)
	res := get(t, h, "GET", "/", nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %d", res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("Content-Type %q", ct)
	}
	if !strings.Contains(string(body), "<html") {
		t.Errorf("body is not the page: %.200s", body)
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	for _, banned := range []string{"unsafe-inline", "unsafe-eval", "*", "http:", "ws:"} {
		if strings.Contains(csp, banned) {
			t.Errorf("CSP %q allows %q", csp, banned)
		}
	}
	if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", got)
	}
	if got := res.Header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("index.html Cache-Control %q, want no-cache", got)
	}
	// The page itself carries no inline script and loads only its assets.
	if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).Match(body) {
		t.Errorf("index.html has an inline script")
	}
	if regexp.MustCompile(`(?i)\son[a-z]+\s*=`).Match(body) {
		t.Errorf("index.html has an inline event handler")
	}
}

func TestAssetsAreImmutableAndRevalidate(t *testing.T) {
	h := Handler(api)
	res := get(t, h, "GET", "/", nil)
	body, _ := io.ReadAll(res.Body)
	etag := res.Header.Get("ETag")
	if etag == "" {
		t.Fatal("index.html has no ETag")
	}
	if res := get(t, h, "GET", "/", map[string]string{"If-None-Match": etag}); res.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation = %d, want 304", res.StatusCode)
	}
	refs := regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`).FindAllStringSubmatch(string(body), -1)
	if len(refs) == 0 {
		t.Fatalf("index.html references no asset: %.300s", body)
	}
	for _, m := range refs {
		res := get(t, h, "GET", m[1], nil)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d", m[1], res.StatusCode)
			continue
		}
		if cc := res.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("%s Cache-Control %q", m[1], cc)
		}
		if res.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s has no CSP", m[1])
		}
		if !regexp.MustCompile(`-[A-Z0-9]{8}\.(js|css)$`).MatchString(m[1]) {
			t.Errorf("%s carries no content hash in its name", m[1])
		}
	}
}

// The API keeps every path and method the dashboard does not serve.
func TestEverythingElseFallsThroughToTheAPI(t *testing.T) {
	h := Handler(api)
	cases := []struct{ method, path string }{
		{"GET", "/sessions"},
		{"POST", "/sessions"},
		{"GET", "/sessions/ses_x/stream"},
		{"GET", "/metrics"},
		{"POST", "/"},
		{"DELETE", "/index.html"},
		{"GET", "/assets/"},
		{"GET", "/assets/nope.js"},
		{"GET", "/assets/../web.go"},
		{"GET", "/assets//x"},
		{"GET", "/nothing"},
	}
	for _, c := range cases {
		if res := get(t, h, c.method, c.path, nil); res.StatusCode != http.StatusTeapot {
			t.Errorf("%s %s = %d, want it passed to the API", c.method, c.path, res.StatusCode)
		}
	}
	if res := get(t, h, "HEAD", "/", nil); res.StatusCode != http.StatusOK {
		t.Errorf("HEAD / = %d", res.StatusCode)
	}
}
