package server_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

// TestSSEGuarded: GET /sessions/{id}/events is mounted on the API's
// chain: a foreign Host or Origin is refused (403) and, on a server that
// requires its token, a request without it is refused (401); with it
// the stream opens and starts with the retry field and the ack.
func TestSSEGuarded(t *testing.T) {
	h := servertest.Start(t, "", func(c *config.Config) { c.PublicName = "m.example" })
	sid := h.CreateSession()
	url := h.URL + "/sessions/" + sid + "/events?preset=chat"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	get := func(mod func(*http.Request)) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+h.Token)
		mod(req)
		resp, err := h.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for name, c := range map[string]struct {
		mod  func(*http.Request)
		want int
	}{
		"no token":       {func(r *http.Request) { r.Header.Del("Authorization") }, http.StatusUnauthorized},
		"foreign host":   {func(r *http.Request) { r.Host = "evil.example" }, http.StatusForbidden},
		"foreign origin": {func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, http.StatusForbidden},
	} {
		if resp := get(c.mod); resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, c.want)
		}
	}
	resp := get(func(*http.Request) {})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("with the token: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r := bufio.NewReader(resp.Body)
	var lines []string
	for len(lines) < 3 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", lines, err)
		}
		lines = append(lines, line)
	}
	if lines[0] != "retry: 2000\n" || lines[1] != "\n" || !strings.HasPrefix(lines[2], `data: {"type":"subscribe_ack"`) {
		t.Fatalf("stream starts %q", lines)
	}
}
