package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/servertest"
)

// The dashboard is mounted at "/" with its CSP, behind the local-safety
// guard, and the API keeps its routes and its JSON 404.
func TestDashboardServedAtRootBesideTheAPI(t *testing.T) {
	h := servertest.Start(t, "")
	get := func(path string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", h.URL+path, nil)
		servertest.Must(t, err)
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v // net/http sends req.Host, not a Host header
				continue
			}
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		servertest.Must(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}

	res, body := get("/", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `<div id="app">`) {
		t.Fatalf("GET / = %d %.200q", res.StatusCode, body)
	}
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q", csp)
	}

	// The API still answers, and unknown paths keep the API's JSON 404.
	var list struct{ Sessions []any }
	if code := h.Do("GET", "/sessions", nil, &list); code != http.StatusOK {
		t.Errorf("GET /sessions = %d", code)
	}
	if code := h.Do("POST", "/", map[string]any{}, nil); code == http.StatusOK {
		t.Errorf("POST / = %d, want the API's refusal", code)
	}
	res, body = get("/no/such/page", nil)
	if res.StatusCode != http.StatusNotFound || !strings.Contains(body, `"error"`) {
		t.Errorf("GET /no/such/page = %d %q", res.StatusCode, body)
	}

	// The guard covers the page too: a rebinding Host is refused.
	res, _ = get("/", map[string]string{"Host": "evil.example:8421"})
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("GET / with a foreign Host = %d, want 403", res.StatusCode)
	}
}

// The ready line names the dashboard's URL.
func TestReadyLineNamesTheDashboard(t *testing.T) {
	h := servertest.Start(t, "")
	h.Stop()
	cfg := h.Config
	cfg.Addr = "127.0.0.1:0"
	srv, err := server.New(context.Background(), cfg, nil)
	servertest.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	done := make(chan error, 1)
	lines := make(chan string, 1)
	w := &lineWriter{w: &out, line: lines}
	go func() { done <- srv.Run(ctx, w) }()
	line := <-lines
	cancel()
	servertest.Must(t, <-done)
	if !strings.HasPrefix(line, "metis serving http://127.0.0.1:") || !strings.Contains(line, "; dashboard http://127.0.0.1:") {
		t.Fatalf("ready line %q", line)
	}
}

// lineWriter hands the first line written to it over a channel.
type lineWriter struct {
	w    *bytes.Buffer
	line chan<- string
	sent bool
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.w.Write(p)
	if i := bytes.IndexByte(l.w.Bytes(), '\n'); i >= 0 && !l.sent {
		l.line <- string(l.w.Bytes()[:i])
		l.sent = true
	}
	return len(p), nil
}
