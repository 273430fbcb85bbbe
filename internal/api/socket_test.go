package api_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/metis-agent/metis/internal/api"
)

// TestGuardOverSocket: a request that came over a unix socket is plain
// HTTP for the guard even when the server speaks TLS (its pages, and so
// its own Origin and its ws_url, are http/ws), and passes the same Host
// and Origin checks as over TCP.
func TestGuardOverSocket(t *testing.T) {
	var scheme string
	h := api.Guard{TLS: true}.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme = api.PageScheme(r)
	}))
	do := func(local net.Addr, host, origin string) (int, string) {
		scheme = ""
		r := httptest.NewRequest(http.MethodGet, "http://"+host+"/sessions", nil)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, local))
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, scheme
	}
	sock := &net.UnixAddr{Name: "/home/me/.metis/metis.sock", Net: "unix"}
	tcp := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8421}
	if !api.OverSocket(httptest.NewRequest(http.MethodGet, "/", nil).WithContext(context.WithValue(context.Background(), http.LocalAddrContextKey, sock))) {
		t.Fatal("OverSocket is false for a unix local address")
	}
	if code, s := do(sock, "localhost", ""); code != http.StatusOK || s != "http" {
		t.Fatalf("over the socket of a TLS server: %d, scheme %q; want 200 http", code, s)
	}
	if code, s := do(tcp, "localhost", ""); code != http.StatusOK || s != "https" {
		t.Fatalf("over TCP of a TLS server: %d, scheme %q; want 200 https", code, s)
	}
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{"localhost", "http://localhost", http.StatusOK},
		{"localhost", "https://localhost", http.StatusForbidden},
		{"localhost", "http://evil.example", http.StatusForbidden},
		{"evil.example", "", http.StatusForbidden},
		{"metis.sock", "", http.StatusForbidden},
	} {
		if code, _ := do(sock, c.host, c.origin); code != c.want {
			t.Errorf("over the socket, Host %q Origin %q: %d, want %d", c.host, c.origin, code, c.want)
		}
	}
}
