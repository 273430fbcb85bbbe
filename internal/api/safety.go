package api

import (
	"context"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Guard enforces contract §6 on every request before it reaches a
// handler:
//   - the Host header must name a loopback host (localhost, 127.0.0.0/8,
//     ::1), the configured listen host or a configured public name,
//     which defeats DNS rebinding;
//   - a present Origin must be this server's own page: the scheme the
//     page is served with (http, or https under TLS or for a public name
//     declared https) and the request's host; "null", ws:, wss:, another
//     scheme and every other origin are refused, so no other web page
//     can open the stream or call the API;
//   - state-changing methods must send Content-Type: application/json,
//     which a cross-site form or no-cors fetch cannot (POST /logout
//     without a body may send none).
//
// The same checks apply to requests over the server's unix socket, which
// are plain HTTP even when the server speaks TLS (OverSocket).
//
// Refusals are 403 (415 for the content type) with the JSON error body.
type Guard struct {
	// ExtraHosts are host names (no port) accepted besides loopback.
	ExtraHosts []string
	// PublicNames are the names clients reach the server by when that is
	// not the listen address (--public-name).
	PublicNames []PublicName
	// TLS says the server itself speaks TLS: its pages are https.
	TLS bool
}

// Wrap returns h behind the guard.
func (g Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pub, ok := g.hostAllowed(r.Host)
		if !ok {
			WriteError(w, http.StatusForbidden, CodeForbiddenHost, "Host "+quote(r.Host)+" is not this server's; metis answers only to loopback names, its listen address and its --public-name")
			return
		}
		scheme := "http"
		if r.TLS != nil || g.TLS && !OverSocket(r) {
			scheme = "https"
		}
		if pub != nil && pub.Scheme != "" {
			scheme = pub.Scheme
		}
		if o, ok := r.Header["Origin"]; ok && !originAllowed(o, scheme, r.Host) {
			WriteError(w, http.StatusForbidden, CodeForbiddenOrigin, "requests from another origin are refused")
			return
		}
		if stateChanging(r.Method) && !isJSON(r.Header.Get("Content-Type")) && !bodilessLogout(r) {
			WriteError(w, http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "send Content-Type: application/json")
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), schemeKey{}, scheme)))
	})
}

type schemeKey struct{}

// OverSocket reports whether r came over a unix socket (the server's
// --socket) rather than TCP. Such a connection is plain HTTP even when
// the TCP listener speaks TLS; the Host, Origin and Content-Type checks
// apply to it as to TCP (docs/unix-socket.md says why).
func OverSocket(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && a.Network() == "unix"
}

// PageScheme is the scheme of the server's own pages as the client of r
// sees them: "https" under TLS or behind a proxy declared with an https
// public name, else "http". It is known once the Guard passed r.
func PageScheme(r *http.Request) string {
	if s, ok := r.Context().Value(schemeKey{}).(string); ok {
		return s
	}
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// hostAllowed reports whether the Host header names this server, and
// the public name it matched, if any.
func (g Guard) hostAllowed(hostport string) (*PublicName, bool) {
	host, port := hostport, ""
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	}
	host = normalHost(host)
	if host == "" {
		return nil, false
	}
	if host == "localhost" {
		return nil, true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil, true
	}
	for i := range g.PublicNames {
		if p := &g.PublicNames[i]; p.matches(host, port) {
			return p, true
		}
	}
	for _, e := range g.ExtraHosts {
		if strings.EqualFold(normalHost(e), host) {
			return nil, true
		}
	}
	return nil, false
}

func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// originAllowed accepts exactly one Origin value equal to this server's
// own page origin, scheme://host.
func originAllowed(values []string, scheme, host string) bool {
	if len(values) != 1 {
		return false
	}
	u, err := url.Parse(values[0])
	if err != nil || u.Host == "" || u.Path != "" && u.Path != "/" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if !strings.EqualFold(u.Scheme, scheme) {
		return false
	}
	return strings.EqualFold(stripDefaultPort(u.Host, scheme), stripDefaultPort(host, scheme))
}

// stripDefaultPort drops the scheme's default port from host:port, as
// browsers do in an Origin.
func stripDefaultPort(hostport, scheme string) string {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	if scheme == "http" && p == "80" || scheme == "https" && p == "443" {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return hostport
}

// bodilessLogout reports whether r is POST /logout with no body and no
// Content-Type: it has nothing to declare, and it can only end the
// session of the cookie it carries, which SameSite=Strict keeps other
// sites from sending (the Origin check refuses their pages anyway).
func bodilessLogout(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/logout" && r.ContentLength == 0 && len(r.Header.Values("Content-Type")) == 0
}

func stateChanging(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return "\"" + strings.ToValidUTF8(s, "?") + "\""
}
