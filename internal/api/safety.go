package api

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Guard enforces contract §6 on every request before it reaches a
// handler:
//   - the Host header must name a loopback host (localhost, 127.0.0.0/8,
//     ::1) or the configured listen host, which defeats DNS rebinding;
//   - a present Origin must be this server's own (http or ws scheme with
//     the request's host); "null" and every other origin are refused, so
//     no other web page can open the stream or call the API;
//   - state-changing methods must send Content-Type: application/json,
//     which a cross-site form or no-cors fetch cannot.
//
// Refusals are 403 (415 for the content type) with the JSON error body.
type Guard struct {
	// ExtraHosts are host names (no port) accepted besides loopback.
	ExtraHosts []string
}

// Wrap returns h behind the guard.
func (g Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			WriteError(w, http.StatusForbidden, CodeForbiddenHost, "Host "+quote(r.Host)+" is not this server's; metis answers only to loopback names")
			return
		}
		if o, ok := r.Header["Origin"]; ok && !originAllowed(o, r.Host) {
			WriteError(w, http.StatusForbidden, CodeForbiddenOrigin, "requests from another origin are refused")
			return
		}
		if stateChanging(r.Method) && !isJSON(r.Header.Get("Content-Type")) {
			WriteError(w, http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "send Content-Type: application/json")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (g Guard) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, e := range g.ExtraHosts {
		if strings.EqualFold(e, host) {
			return true
		}
	}
	return false
}

// originAllowed accepts exactly one Origin value equal to this server's
// own origin.
func originAllowed(values []string, host string) bool {
	if len(values) != 1 {
		return false
	}
	u, err := url.Parse(values[0])
	if err != nil || u.Host == "" || u.Path != "" && u.Path != "/" || u.User != nil {
		return false
	}
	switch u.Scheme {
	case "http", "https", "ws", "wss":
	default:
		return false
	}
	return strings.EqualFold(u.Host, host)
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
