package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/servertest"
)

func TestParsePublicName(t *testing.T) {
	for in, want := range map[string]api.PublicName{
		"metis.example.com":          {Host: "metis.example.com"},
		"Metis.Example.COM.":         {Host: "metis.example.com"},
		"metis.example.com:8421":     {Host: "metis.example.com", Port: "8421"},
		"https://metis.example.com":  {Scheme: "https", Host: "metis.example.com"},
		"HTTPS://metis.example.com/": {Scheme: "https", Host: "metis.example.com"},
		"http://box:80":              {Scheme: "http", Host: "box", Port: "80"},
		"192.168.1.5":                {Host: "192.168.1.5"},
		"192.168.1.5:8421":           {Host: "192.168.1.5", Port: "8421"},
		"[fd00::5]:8421":             {Host: "fd00::5", Port: "8421"},
		"fd00::5":                    {Host: "fd00::5"},
		"[fd00::5]":                  {Host: "fd00::5"},
		" my_box ":                   {Host: "my_box"},
	} {
		got, err := api.ParsePublicName(in)
		if err != nil || got != want {
			t.Errorf("ParsePublicName(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", "ws://metis.example", "ftp://x", "https://user@x", "https://x/path", "https://x?q",
		"x:", "x:0", "x:65536", "x:port", "*.example.com", "a..b", "a b", "https://", "[fd00::5", "metis.example.com/path", "é.example"} {
		if p, err := api.ParsePublicName(in); err == nil {
			t.Errorf("ParsePublicName(%q) = %+v, want an error", in, p)
		}
	}
}

func FuzzParsePublicName(f *testing.F) {
	for _, s := range []string{"metis.example.com", "https://m.example:8443", "[::1]:1", "fd00::5", "x:", "https://u@x/p", "a..b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := api.ParsePublicName(s)
		if err != nil {
			return
		}
		if p.Host == "" || strings.ContainsAny(p.Host, "/@?#[] ") {
			t.Fatalf("%q: host %q", s, p.Host)
		}
		again, err := api.ParsePublicName(p.String())
		if err != nil || again != p {
			t.Fatalf("%q: %+v prints as %q, which parses to %+v, %v", s, p, p.String(), again, err)
		}
	})
}

// TestPublicNames: the Host check accepts the configured public names
// (with their port when one is given), the Origin check wants the
// name's scheme (http by default, https when declared), and the attach
// URL of an https name is wss.
func TestPublicNames(t *testing.T) {
	h := servertest.Start(t, "", withPublicName("metis.example.com, https://secure.example:8443"))
	sid := h.CreateSession()
	tok := bearerHeader(h.Token)
	p := port(t, hostPort(t, h))
	for _, c := range []struct {
		host, origin string
		status       int
		code, wsURL  string
	}{
		{host: "metis.example.com:" + p, status: 200, wsURL: "ws://metis.example.com:" + p + "/"},
		{host: "METIS.example.com", status: 200, wsURL: "ws://METIS.example.com/"},
		{host: "metis.example.com:" + p, origin: "http://metis.example.com:" + p, status: 200},
		{host: "metis.example.com", origin: "http://metis.example.com:80", status: 200}, // default port
		{host: "metis.example.com:" + p, origin: "https://metis.example.com:" + p, status: 403, code: api.CodeForbiddenOrigin},
		{host: "metis.example.com:" + p, origin: "ws://metis.example.com:" + p, status: 403, code: api.CodeForbiddenOrigin},
		{host: "metis.example.com:" + p, origin: "http://secure.example:8443", status: 403, code: api.CodeForbiddenOrigin},
		{host: "secure.example:8443", status: 200, wsURL: "wss://secure.example:8443/"},
		{host: "secure.example:8443", origin: "https://secure.example:8443", status: 200},
		{host: "secure.example:8443", origin: "http://secure.example:8443", status: 403, code: api.CodeForbiddenOrigin},
		{host: "secure.example:8443", origin: "wss://secure.example:8443", status: 403, code: api.CodeForbiddenOrigin},
		{host: "secure.example:9999", status: 403, code: api.CodeForbiddenHost},
		{host: "secure.example", status: 403, code: api.CodeForbiddenHost}, // 443 is not the declared port
		{host: "other.example.com:" + p, status: 403, code: api.CodeForbiddenHost},
		{host: "metis.example.com.evil.example", status: 403, code: api.CodeForbiddenHost},
	} {
		var o []string
		if c.origin != "" {
			o = []string{c.origin}
		}
		r := do(t, h, req{method: "GET", path: "/sessions/" + sid, host: c.host, origin: o, header: tok})
		if c.status != 200 {
			expectErr(t, r, c.status, c.code)
			continue
		}
		if r.status != 200 {
			t.Fatalf("Host %s Origin %s: %d %s", c.host, c.origin, r.status, r.body)
		}
		var a struct {
			WSURL string `json:"ws_url"`
		}
		r.decode(t, &a)
		if c.wsURL != "" && !strings.HasPrefix(a.WSURL, c.wsURL) {
			t.Errorf("Host %s: ws_url %s, want %s…", c.host, a.WSURL, c.wsURL)
		}
	}
	// The public name does not weaken the token: refused without it.
	expectUnauthorized(t, do(t, h, req{method: "GET", path: "/sessions", host: "metis.example.com"}))
}

// TestTLSOrigin: under TLS the server's own page is https://host:port;
// its http:// twin and ws:/wss: origins are refused, and ws_url is wss.
func TestTLSOrigin(t *testing.T) {
	cert, key := servertest.SelfSignedCert(t, t.TempDir())
	h := servertest.Start(t, "", func(c *config.Config) { c.TLSCert, c.TLSKey = cert, key })
	if !strings.HasPrefix(h.URL, "https://") {
		t.Fatalf("URL %s", h.URL)
	}
	sid := h.CreateSession()
	hp := hostPort(t, h)
	for _, o := range []string{"http://" + hp, "ws://" + hp, "wss://" + hp, "https://localhost:" + port(t, hp)} {
		expectErr(t, do(t, h, req{method: "GET", path: "/sessions", origin: []string{o}}), http.StatusForbidden, api.CodeForbiddenOrigin)
	}
	r := do(t, h, req{method: "GET", path: "/sessions/" + sid, origin: []string{"https://" + hp}})
	if r.status != http.StatusOK {
		t.Fatalf("own https origin: %d %s", r.status, r.body)
	}
	var a struct {
		WSURL string `json:"ws_url"`
	}
	r.decode(t, &a)
	if !strings.HasPrefix(a.WSURL, "wss://"+hp+"/") {
		t.Fatalf("ws_url %s", a.WSURL)
	}
}

// TestLoginCookieSecure: the login cookie is Secure under TLS and when
// the request came by a public name declared https (a TLS proxy), and
// not on plain http.
func TestLoginCookieSecure(t *testing.T) {
	cert, key := servertest.SelfSignedCert(t, t.TempDir())
	tls := servertest.Start(t, "", func(c *config.Config) { c.TLSCert, c.TLSKey, c.PublicName = cert, key, "metis.example.com" })
	plain := servertest.Start(t, "", withPublicName("metis.example.com, https://secure.example"))
	for _, c := range []struct {
		h      *servertest.Harness
		host   string
		secure bool
	}{
		{tls, "", true},
		{plain, "", false},
		{plain, "metis.example.com", false},
		{plain, "secure.example", true},
	} {
		r := do(t, c.h, req{method: "POST", path: "/login", host: c.host, body: `{"token":` + jsonString(t, c.h.Token) + `}`})
		sc := r.header.Get("Set-Cookie")
		if r.status != http.StatusOK || strings.Contains(sc, "; Secure") != c.secure || strings.HasPrefix(sc, api.SecureCookieName+"=") != c.secure {
			t.Errorf("%s Host %q: %d, Set-Cookie %q, want Secure and __Host- %v", c.h.URL, c.host, r.status, sc, c.secure)
			continue
		}
		// The cookie opens the API under its own name only: a plain
		// metis_session cookie over https (one any host could have set)
		// is not looked at.
		cs := (&http.Response{Header: r.header}).Cookies()
		other := api.SecureCookieName
		if c.secure {
			other = api.CookieName
		}
		if g := do(t, c.h, req{method: "GET", path: "/sessions", host: c.host, header: map[string]string{"Cookie": cs[0].Name + "=" + cs[0].Value}}); g.status != http.StatusOK {
			t.Errorf("%s Host %q: the cookie was refused: %d", c.h.URL, c.host, g.status)
		}
		expectUnauthorized(t, do(t, c.h, req{method: "GET", path: "/sessions", host: c.host, header: map[string]string{"Cookie": other + "=" + cs[0].Value}}))
	}
}
