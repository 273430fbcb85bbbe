package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/token"
)

// withPublicName configures a public name, which requires the token.
func withPublicName(n string) servertest.Option {
	return func(c *config.Config) { c.PublicName = n }
}

func bearerHeader(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok}
}

// expectUnauthorized checks a 401 with the JSON error body and a
// WWW-Authenticate: Bearer challenge.
func expectUnauthorized(t *testing.T, r reply) {
	t.Helper()
	expectErr(t, r, http.StatusUnauthorized, api.CodeUnauthorized)
	if c := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(c, "Bearer ") {
		t.Fatalf("WWW-Authenticate %q", c)
	}
}

// TestTokenRequiredOnEveryRequest: a server that requires its token
// refuses every request without it, or with a wrong one, with 401:
// reads, writes, the stream's upgrade, metrics and unknown paths alike;
// with it, they work.
func TestTokenRequiredOnEveryRequest(t *testing.T) {
	h := servertest.Start(t, "", withPublicName("metis.example"))
	if len(h.Token) != 43 {
		t.Fatalf("token of %d characters in <home>/token", len(h.Token))
	}
	sid := h.CreateSession() // with the token
	endpoints := []req{
		{method: "GET", path: "/sessions"},
		{method: "GET", path: "/sessions/" + sid},
		{method: "GET", path: "/sessions/" + sid + "/messages"},
		{method: "GET", path: "/sessions/" + sid + "/stream?attach=atk_x"},
		{method: "GET", path: "/metrics"},
		{method: "GET", path: "/"},
		{method: "GET", path: "/nope"},
		{method: "POST", path: "/sessions", body: `{"workspace_path":` + jsonString(t, h.Workspace) + `}`},
		{method: "POST", path: "/sessions/" + sid + "/turns", body: `{"content":"/echo hi"}`},
		{method: "POST", path: "/sessions/" + sid + "/turns/turn_x/cancel"},
	}
	wrong := []map[string]string{
		nil,
		bearerHeader(flipFirst(h.Token)),
		bearerHeader(h.Token + "x"),
		bearerHeader(h.Token[:20]),
		{"Authorization": "Basic " + h.Token},
		{"Authorization": h.Token},
		{"Authorization": "Bearer"},
		{"Authorization": "Bearer " + h.Token + " " + h.Token},
		{"Cookie": api.CookieName + "=" + h.Token}, // the token is not the cookie
		{"Cookie": api.CookieName + "="},
	}
	for _, e := range endpoints {
		for _, hd := range wrong {
			e.header = hd
			t.Run(e.method+" "+e.path, func(t *testing.T) {
				r := do(t, h, e)
				if _, hasAuth := hd["Authorization"]; e.path == "/" && !hasAuth {
					// A browser opening the dashboard is sent to log in.
					if r.status != http.StatusSeeOther || r.header.Get("Location") != "/login" {
						t.Fatalf("GET / without credentials: %d, Location %q; want 303 to /login", r.status, r.header.Get("Location"))
					}
					return
				}
				expectUnauthorized(t, r)
			})
		}
	}
	if n := sessionCount(t, h); n != 1 { // counted with the token
		t.Fatalf("%d sessions after refused requests", n)
	}
	checkNoTurns(t, h, sid)

	// The scheme is case-insensitive; the token works on every endpoint.
	for _, e := range []req{
		{method: "GET", path: "/sessions", header: bearerHeader(h.Token)},
		{method: "GET", path: "/sessions/" + sid, header: map[string]string{"Authorization": "bearer " + h.Token}},
		{method: "GET", path: "/metrics", header: bearerHeader(h.Token)},
	} {
		if r := do(t, h, e); r.status != http.StatusOK {
			t.Fatalf("%s %s with the token: %d %s", e.method, e.path, r.status, r.body)
		}
	}
	if r := do(t, h, req{method: "GET", path: "/nope", header: bearerHeader(h.Token)}); r.status != http.StatusNotFound {
		t.Fatalf("unknown path with the token: %d", r.status)
	}

	// The WebSocket upgrade: refused without the token (even with a valid
	// attach token), accepted with it.
	var a struct {
		WSURL string `json:"ws_url"`
	}
	do(t, h, req{method: "GET", path: "/sessions/" + sid, header: bearerHeader(h.Token)}).decode(t, &a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, a.WSURL, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("upgrade without the token: %v %v", resp, err)
	}
	ws, _, err := websocket.Dial(ctx, a.WSURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + h.Token}}})
	if err != nil {
		t.Fatalf("upgrade with the token (the attach token was not spent by the refused one): %v", err)
	}
	ws.CloseNow()
}

// TestLoginCookie: a browser logs in with POST /login and the token; the
// HttpOnly, SameSite=Strict cookie of its login session then opens the
// API and the stream; POST /logout ends the session and clears the
// cookie. A wrong token sets no cookie; two logins get two sessions.
func TestLoginCookie(t *testing.T) {
	h := servertest.Start(t, "", withPublicName("metis.example"))
	sid := h.CreateSession()
	hp := hostPort(t, h)
	own := []string{"http://" + hp}

	for _, body := range []string{`{"token":"wrong-token-0123456789"}`, `{"token":""}`, `{}`, `{"token":` + jsonString(t, h.Token[:42]) + `}`} {
		r := do(t, h, req{method: "POST", path: "/login", body: body, origin: own})
		expectUnauthorized(t, r)
		if len(r.header.Values("Set-Cookie")) != 0 {
			t.Fatalf("a refused login set a cookie: %v", r.header.Values("Set-Cookie"))
		}
	}
	expectErr(t, do(t, h, req{method: "POST", path: "/login", body: `{"token":`}), http.StatusBadRequest, api.CodeInvalidJSON)
	expectErr(t, do(t, h, req{method: "PUT", path: "/login", body: "{}"}), http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
	// GET /login is the page a browser logs in with, served without the
	// token, locked down (no framing, only its own script).
	page := do(t, h, req{method: "GET", path: "/login"})
	if page.status != http.StatusOK || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(page.body), `fetch("/login"`) || page.header.Get("X-Frame-Options") != "DENY" ||
		!strings.Contains(page.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
		!strings.Contains(page.header.Get("Content-Security-Policy"), "script-src 'sha256-") {
		t.Fatalf("login page: %d %v\n%s", page.status, page.header, page.body)
	}
	// The guard still stands in front of /login: another origin, a form.
	expectErr(t, do(t, h, req{method: "POST", path: "/login", body: `{"token":` + jsonString(t, h.Token) + `}`, origin: []string{"http://evil.example"}}),
		http.StatusForbidden, api.CodeForbiddenOrigin)
	expectErr(t, do(t, h, req{method: "POST", path: "/login", body: "token=" + h.Token, contentType: "application/x-www-form-urlencoded"}),
		http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia)

	c := logIn(t, h, own)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure || c.MaxAge != 30*24*3600 || c.Domain != "" {
		t.Fatalf("cookie attributes %+v", c)
	}
	if c2 := logIn(t, h, own); c2.Value == c.Value {
		t.Fatal("two logins got the same session id")
	}
	if strings.Contains(c.Value, h.Token) {
		t.Fatal("the login cookie carries the token itself")
	}
	cookie := map[string]string{"Cookie": c.Name + "=" + c.Value}
	if r := do(t, h, req{method: "GET", path: "/sessions", header: cookie, origin: own}); r.status != http.StatusOK {
		t.Fatalf("GET with the cookie: %d %s", r.status, r.body)
	}
	var a struct {
		WSURL string `json:"ws_url"`
	}
	do(t, h, req{method: "GET", path: "/sessions/" + sid, header: cookie}).decode(t, &a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, a.WSURL, &websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {c.Name + "=" + c.Value}, "Origin": own}})
	if err != nil {
		t.Fatalf("upgrade with the cookie: %v", err)
	}
	ws.CloseNow()

	r := do(t, h, req{method: "POST", path: "/logout", header: cookie, origin: own})
	if r.status != http.StatusNoContent || !strings.Contains(r.header.Get("Set-Cookie"), api.CookieName+"=;") || !strings.Contains(r.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d %q", r.status, r.header.Get("Set-Cookie"))
	}
}

// logIn posts the token to /login and returns the session cookie.
func logIn(t *testing.T, h *servertest.Harness, origin []string) *http.Cookie {
	t.Helper()
	r := do(t, h, req{method: "POST", path: "/login", body: `{"token":` + jsonString(t, h.Token) + `}`, origin: origin})
	if r.status != http.StatusOK {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), h.Token) {
		t.Fatal("the login answer carries the token")
	}
	cookies := (&http.Response{Header: r.header}).Cookies()
	if len(cookies) != 1 || cookies[0].Name != api.CookieName || len(cookies[0].Value) != 43 {
		t.Fatalf("cookies %v", r.header.Values("Set-Cookie"))
	}
	return cookies[0]
}

// TestLoginCookieReplay: the cookie of a login session is refused once
// the browser logged out (replayed as it was), and after the token
// changed; it keeps working across a restart with the same token.
func TestLoginCookieReplay(t *testing.T) {
	h := servertest.Start(t, "", withPublicName("metis.example"))
	own := []string{"http://" + hostPort(t, h)}
	out, kept := logIn(t, h, own), logIn(t, h, own)
	jar := func(c *http.Cookie) map[string]string { return map[string]string{"Cookie": c.Name + "=" + c.Value} }
	if r := do(t, h, req{method: "POST", path: "/logout", header: jar(out), origin: own}); r.status != http.StatusNoContent {
		t.Fatalf("logout: %d %s", r.status, r.body)
	}
	expectUnauthorized(t, do(t, h, req{method: "GET", path: "/sessions", header: jar(out)}))
	if r := do(t, h, req{method: "GET", path: "/sessions", header: jar(kept)}); r.status != http.StatusOK {
		t.Fatalf("another browser's session ended with this one's logout: %d", r.status)
	}

	// A restart with the same token: the session that was not logged
	// out still works, the logged-out one stays refused.
	h.Stop()
	h2 := servertest.Start(t, h.Home, withPublicName("metis.example"))
	if r := do(t, h2, req{method: "GET", path: "/sessions", header: jar(kept)}); r.status != http.StatusOK {
		t.Fatalf("the login session did not survive a restart: %d %s", r.status, r.body)
	}
	expectUnauthorized(t, do(t, h2, req{method: "GET", path: "/sessions", header: jar(out)}))

	// A new token voids every session of the old one.
	h2.Stop()
	servertest.Must(t, os.Remove(filepath.Join(h.Home, token.FileName)))
	h3 := servertest.Start(t, h.Home, withPublicName("metis.example"))
	if h3.Token == h.Token {
		t.Fatal("the token was not regenerated")
	}
	expectUnauthorized(t, do(t, h3, req{method: "GET", path: "/sessions", header: jar(kept)}))
	// And the old token's sessions are gone for good: back to the old
	// token, they stay refused.
	h3.Stop()
	servertest.Must(t, os.WriteFile(filepath.Join(h.Home, token.FileName), []byte(h.Token+"\n"), 0o600))
	h4 := servertest.Start(t, h.Home, withPublicName("metis.example"))
	expectUnauthorized(t, do(t, h4, req{method: "GET", path: "/sessions", header: jar(kept)}))
}

// TestLogoutWithoutContentType: POST /logout with no body needs no
// Content-Type (it used to be a 415), and still ends the session; a
// logout with a body of another type is still refused.
func TestLogoutWithoutContentType(t *testing.T) {
	h := servertest.Start(t, "", withPublicName("metis.example"))
	own := []string{"http://" + hostPort(t, h)}
	c := logIn(t, h, own)
	jar := map[string]string{"Cookie": c.Name + "=" + c.Value}
	expectErr(t, do(t, h, req{method: "POST", path: "/logout", body: "x=1", contentType: "application/x-www-form-urlencoded", header: jar, origin: own}),
		http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia)
	if r := do(t, h, req{method: "POST", path: "/logout", noCT: true, header: jar, origin: own}); r.status != http.StatusNoContent {
		t.Fatalf("logout without a content type: %d %s", r.status, r.body)
	}
	expectUnauthorized(t, do(t, h, req{method: "GET", path: "/sessions", header: jar}))
	// Other state-changing requests still need it, without a body too.
	expectErr(t, do(t, h, req{method: "POST", path: "/sessions", noCT: true, header: bearerHeader(h.Token)}),
		http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia)
}

// TestLoopbackNeedsNoToken: the default loopback server asks no token
// (contract §6 unchanged) and says so at /login.
func TestLoopbackNeedsNoToken(t *testing.T) {
	h := servertest.Start(t, "")
	if h.Token != "" {
		t.Fatal("a loopback server has a token")
	}
	if _, err := os.Stat(filepath.Join(h.Home, token.FileName)); err == nil {
		t.Fatal("a loopback server generated a token file")
	}
	if r := get(t, h, "/sessions"); r.status != http.StatusOK {
		t.Fatalf("GET /sessions: %d", r.status)
	}
	r := post(t, h, "/login", `{"token":"anything-at-all-0123"}`)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"token_required":false`) || r.header.Get("Set-Cookie") != "" {
		t.Fatalf("login on loopback: %d %s %q", r.status, r.body, r.header.Get("Set-Cookie"))
	}
}

// TestTokenFileRequiresTheToken: --token-file on a loopback server turns
// the token on (a reverse proxy in front makes loopback public).
func TestTokenFileRequiresTheToken(t *testing.T) {
	tf := filepath.Join(t.TempDir(), "tok")
	servertest.Must(t, os.WriteFile(tf, []byte("my-own-token-0123456789\n"), 0o600))
	h := servertest.Start(t, "", func(c *config.Config) { c.TokenFile = tf })
	if h.Token != "my-own-token-0123456789" {
		t.Fatalf("token %q", h.Token)
	}
	expectUnauthorized(t, do(t, h, req{method: "GET", path: "/sessions"}))
	if r := do(t, h, req{method: "GET", path: "/sessions", header: bearerHeader(h.Token)}); r.status != http.StatusOK {
		t.Fatalf("with the token: %d", r.status)
	}
	if _, err := os.Stat(filepath.Join(h.Home, token.FileName)); err == nil {
		t.Fatal("<home>/token generated although --token-file was given")
	}
}

// TestTokenNeverLogged: with debug logging, neither the token nor a
// wrong one a client sent appears in the log or in any answer.
func TestTokenNeverLogged(t *testing.T) {
	var logs servertest.SyncBuffer
	h := servertest.StartLogged(t, "", slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), withPublicName("metis.example"))
	wrongTok := "not-the-token-" + strings.Repeat("z", 20)
	var bodies []string
	for _, r := range []req{
		{method: "GET", path: "/sessions", header: bearerHeader(wrongTok)},
		{method: "GET", path: "/sessions", header: map[string]string{"Authorization": "Basic " + wrongTok}},
		{method: "GET", path: "/sessions", header: map[string]string{"Cookie": api.CookieName + "=" + wrongTok}},
		{method: "POST", path: "/login", body: `{"token":` + jsonString(t, wrongTok) + `}`},
		{method: "POST", path: "/login", body: `{"token":` + jsonString(t, h.Token) + `}`},
		{method: "GET", path: "/sessions", header: bearerHeader(h.Token)},
		{method: "GET", path: "/nope", header: bearerHeader(h.Token)},
	} {
		bodies = append(bodies, string(do(t, h, r).body))
	}
	h.Stop()
	all := logs.String() + strings.Join(bodies, "\n")
	if !strings.Contains(logs.String(), "refused a request without a valid token") {
		t.Fatalf("the refusals were not logged at all:\n%s", logs.String())
	}
	for _, secret := range []string{h.Token, wrongTok} {
		if strings.Contains(all, secret) {
			t.Fatalf("%q appears in the logs or answers:\n%s", secret, all)
		}
	}
}

// flipFirst returns tok with its first character changed: a token of
// the same length that is never tok itself.
func flipFirst(tok string) string {
	if tok[0] == 'x' {
		return "y" + tok[1:]
	}
	return "x" + tok[1:]
}
