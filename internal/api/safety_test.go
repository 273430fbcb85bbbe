package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/servertest"
)

// TestForbiddenOrigin: a present Origin other than the server's own is
// refused on every endpoint, reads included (contract §6).
func TestForbiddenOrigin(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	hp := hostPort(t, h)
	p := port(t, hp)
	hostile := [][]string{
		{"null"},
		{""},
		{"http://localhost.evil.example"},
		{"http://localhost.evil.example:" + p},
		{"http://evil.example"},
		{"https://evil.example"},
		{"http://127.0.0.1:1"},    // another port
		{"http://127.0.0.1"},      // no port
		{"http://localhost:" + p}, // another name for the same server is another origin
		{"http://127.0.0.1:" + p + ".evil.example"},
		{"http://user@" + hp},
		{"file://" + hp},
		{"chrome-extension://abcdef"},
		{"http://" + hp + "/page"},
		{"127.0.0.1:" + p}, // not an origin
		{"http://" + hp, "http://evil.example"},
		{"http://" + hp, "http://" + hp}, // several values are refused too
		// The scheme counts: the server's own page is http://host:port.
		{"https://" + hp},
		{"ws://" + hp},
		{"wss://" + hp},
		{"ftp://" + hp},
		{"http://" + hp + "?x=1"},
		{"http://" + hp + "#x"},
	}
	endpoints := []req{
		{method: "GET", path: "/sessions"},
		{method: "GET", path: "/sessions/" + sid},
		{method: "GET", path: "/sessions/" + sid + "/messages"},
		{method: "GET", path: "/sessions/" + sid + "/stream?attach=atk_x"},
		{method: "POST", path: "/sessions", body: `{"workspace_path":` + jsonString(t, h.Workspace) + `}`},
		{method: "POST", path: "/sessions/" + sid + "/turns", body: `{"content":"/echo hi"}`},
		{method: "POST", path: "/sessions/" + sid + "/turns/turn_x/cancel"},
		{method: "GET", path: "/nope"},
	}
	for _, o := range hostile {
		for _, e := range endpoints {
			e.origin = o
			t.Run(e.method+" "+e.path+" Origin "+jsonString(t, o[0]), func(t *testing.T) {
				expectErr(t, do(t, h, e), http.StatusForbidden, api.CodeForbiddenOrigin)
			})
		}
	}
	// Nothing was created or started by the refused requests.
	if n := sessionCount(t, h); n != 1 {
		t.Fatalf("%d sessions after hostile requests", n)
	}
	checkNoTurns(t, h, sid)

	// The server's own origin (also with a trailing slash) is accepted,
	// and so is no Origin at all.
	for _, o := range [][]string{nil, {"http://" + hp}, {"http://" + hp + "/"}} {
		r := do(t, h, req{method: "GET", path: "/sessions/" + sid, origin: o})
		if r.status != http.StatusOK {
			t.Errorf("Origin %v: %d %s", o, r.status, r.body)
		}
	}
	r := do(t, h, req{method: "POST", path: "/sessions", body: `{"workspace_path":` + jsonString(t, h.Workspace) + `}`,
		origin: []string{"http://" + hp}})
	if r.status != http.StatusCreated {
		t.Fatalf("own-origin create: %d %s", r.status, r.body)
	}
	// With Host localhost:<port>, the matching origin is http://localhost:<port>.
	r = do(t, h, req{method: "GET", path: "/sessions", host: "localhost:" + p, origin: []string{"http://localhost:" + p}})
	if r.status != http.StatusOK {
		t.Fatalf("localhost origin on localhost host: %d %s", r.status, r.body)
	}
}

// TestForbiddenHost: a Host that is not a loopback name or the configured
// address is refused (DNS rebinding), whatever the rest of the request.
func TestForbiddenHost(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	p := port(t, hostPort(t, h))
	for _, host := range []string{
		"evil.example",
		"evil.example:" + p,
		"localhost.evil.example:8421",
		"localhost.evil.example:" + p,
		"127.0.0.1.nip.io:" + p,
		"127.0.0.1.evil.example",
		"0.0.0.0:" + p,
		"10.0.0.1:" + p,
		"192.168.1.1",
		"[::ffff:8.8.8.8]:" + p,
		"[fe80::1]:" + p,
		"metis:" + p,
		"localhostx:" + p,
	} {
		t.Run(host, func(t *testing.T) {
			for _, r := range []req{
				{method: "GET", path: "/sessions"},
				{method: "GET", path: "/sessions/" + sid},
				{method: "POST", path: "/sessions", body: `{"workspace_path":` + jsonString(t, h.Workspace) + `}`},
				{method: "POST", path: "/sessions/" + sid + "/turns", body: `{"content":"/echo hi"}`},
				{method: "GET", path: "/nope"},
			} {
				r.host = host
				expectErr(t, do(t, h, r), http.StatusForbidden, api.CodeForbiddenHost)
				// The Host check comes first: an own-looking Origin does not help.
				r.origin = []string{"http://" + host}
				expectErr(t, do(t, h, r), http.StatusForbidden, api.CodeForbiddenHost)
			}
		})
	}
	if n := sessionCount(t, h); n != 1 {
		t.Fatalf("%d sessions after rebinding requests", n)
	}
	checkNoTurns(t, h, sid)

	for _, host := range []string{
		"localhost:" + p,
		"LOCALHOST:" + p,
		"localhost.:" + p,
		"localhost",
		"127.0.0.1:" + p,
		"127.0.0.1",
		"127.1.2.3:" + p,
		"[::1]:" + p,
		"[::1]",
	} {
		t.Run("accept "+host, func(t *testing.T) {
			r := do(t, h, req{method: "GET", path: "/sessions/" + sid, host: host})
			if r.status != http.StatusOK {
				t.Fatalf("Host %q: %d %s", host, r.status, r.body)
			}
			// The attach URL names the host the client used.
			var a struct {
				WSURL string `json:"ws_url"`
			}
			r.decode(t, &a)
			if want := "ws://" + host + "/sessions/" + sid + "/stream?attach="; len(a.WSURL) < len(want) || a.WSURL[:len(want)] != want {
				t.Errorf("ws_url %q, want prefix %q", a.WSURL, want)
			}
		})
	}
}

// TestRefusedRequestsChangeNothing: cross-site shaped requests with a
// valid JSON body (a text/plain or form POST, a hostile Origin) are
// refused before any handler runs.
func TestRefusedRequestsChangeNothing(t *testing.T) {
	h := servertest.Start(t, "")
	create := `{"workspace_path":` + jsonString(t, h.Workspace) + `}`
	for _, r := range []struct {
		req
		status int
		code   string
	}{
		{req{method: "POST", path: "/sessions", body: create, contentType: "text/plain"}, 415, api.CodeUnsupportedMedia},
		{req{method: "POST", path: "/sessions", body: create, contentType: "text/plain;charset=UTF-8"}, 415, api.CodeUnsupportedMedia},
		{req{method: "POST", path: "/sessions", body: create, contentType: "application/x-www-form-urlencoded"}, 415, api.CodeUnsupportedMedia},
		{req{method: "POST", path: "/sessions", body: create, noCT: true}, 415, api.CodeUnsupportedMedia},
		{req{method: "POST", path: "/sessions", body: create, origin: []string{"http://evil.example"}}, 403, api.CodeForbiddenOrigin},
		{req{method: "POST", path: "/sessions", body: create, origin: []string{"null"}}, 403, api.CodeForbiddenOrigin},
		{req{method: "POST", path: "/sessions", body: create, contentType: "text/plain", origin: []string{"http://evil.example"}}, 403, api.CodeForbiddenOrigin},
		{req{method: "POST", path: "/sessions", body: create, host: "evil.example"}, 403, api.CodeForbiddenHost},
	} {
		expectErr(t, do(t, h, r.req), r.status, r.code)
	}
	if n := sessionCount(t, h); n != 0 {
		t.Fatalf("refused requests created %d sessions", n)
	}

	// Turns and cancels likewise.
	sid := h.CreateSession()
	turnBody := `{"content":"/echo hi"}`
	for _, r := range []struct {
		req
		status int
		code   string
	}{
		{req{method: "POST", path: "/sessions/" + sid + "/turns", body: turnBody, contentType: "text/plain"}, 415, api.CodeUnsupportedMedia},
		{req{method: "POST", path: "/sessions/" + sid + "/turns", body: turnBody, noCT: true}, 415, api.CodeUnsupportedMedia},
		{req{method: "POST", path: "/sessions/" + sid + "/turns", body: turnBody, origin: []string{"http://evil.example"}}, 403, api.CodeForbiddenOrigin},
		{req{method: "POST", path: "/sessions/" + sid + "/turns", body: turnBody, host: "evil.example:8421"}, 403, api.CodeForbiddenHost},
	} {
		expectErr(t, do(t, h, r.req), r.status, r.code)
	}
	checkNoTurns(t, h, sid)
}

// checkNoTurns asserts that the session never started a turn.
func checkNoTurns(t *testing.T, h *servertest.Harness, sid string) {
	t.Helper()
	var info struct {
		Session struct {
			TurnCount     int     `json:"turn_count"`
			CurrentTurnID *string `json:"current_turn_id"`
		} `json:"session"`
	}
	get(t, h, "/sessions/"+sid).decode(t, &info)
	if info.Session.TurnCount != 0 || info.Session.CurrentTurnID != nil {
		t.Fatalf("a refused request started a turn: %+v", info.Session)
	}
	var page struct {
		Messages []json.RawMessage `json:"messages"`
	}
	get(t, h, "/sessions/"+sid+"/messages").decode(t, &page)
	if len(page.Messages) != 0 {
		t.Fatalf("refused requests stored %d messages", len(page.Messages))
	}
	for _, ev := range h.Live.Events(sid) {
		if ev.Type != "session.created" {
			t.Fatalf("refused requests emitted %s", ev.Type)
		}
	}
}
