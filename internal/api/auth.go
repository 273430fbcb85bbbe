package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/metis-agent/metis/protocol"
)

// CodeUnauthorized is the error code of a request that lacks the bearer
// token (or carries a wrong one).
const CodeUnauthorized = protocol.CodeUnauthorized

// CookieName is the cookie POST /login sets for browsers.
const CookieName = "metis_auth"

// cookieMaxAge is how long a browser keeps the login cookie, in seconds.
const cookieMaxAge = 30 * 24 * 3600

// maxLogoutBody is how much of a POST /logout body is drained.
const maxLogoutBody = 4096

// Auth requires the server's bearer token on every request it wraps: an
// "Authorization: Bearer <token>" header, or the cookie POST /login sets
// for browsers (which cannot put a header on a WebSocket upgrade or a
// page load). Missing or wrong is 401 with the JSON error body and a
// WWW-Authenticate: Bearer header. Comparisons take constant time, and
// the token is never logged or echoed.
//
// Auth also serves two endpoints of its own, which need no token:
//   - GET /login: a small page with a form that posts the token;
//   - POST /login {"token": "..."}: checks the token and sets the
//     HttpOnly, SameSite=Strict login cookie (Secure under TLS);
//   - POST /logout: clears it.
//
// A zero Auth (no token) lets everything through and answers /login
// with token_required false.
type Auth struct {
	tokenSum [32]byte // sha256 of the token: equal lengths for the comparison
	cookie   string   // the cookie's value, derived from the token
	required bool
	secure   bool
	log      *slog.Logger
}

// NewAuth returns the middleware for token (required when not empty);
// secure marks the login cookie Secure (the server speaks TLS).
func NewAuth(token string, secure bool, log *slog.Logger) *Auth {
	if log == nil {
		log = slog.Default()
	}
	a := &Auth{secure: secure, log: log}
	if token != "" {
		a.required = true
		a.tokenSum = sha256.Sum256([]byte(token))
		// The cookie carries a value derived from the token rather than
		// the token itself: the browser's cookie jar never holds the
		// secret the CLI uses, and a new token voids old cookies.
		m := hmac.New(sha256.New, []byte(token))
		m.Write([]byte("metis login cookie v1"))
		a.cookie = base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	return a
}

// Required reports whether the token is required.
func (a *Auth) Required() bool { return a.required }

// Wrap returns h behind the token check, with /login and /logout served
// here.
func (a *Auth) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/login":
			a.login(w, r)
			return
		case "/logout":
			a.logout(w, r)
			return
		}
		if a.required {
			if ok, why := a.check(r); !ok {
				a.log.Debug("refused a request without a valid token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "why", why)
				if isPageLoad(r) {
					// A person opening the dashboard: the login page,
					// which comes back to it.
					http.Redirect(w, r, "/login", http.StatusSeeOther)
					return
				}
				a.refuse(w, why)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// check reports whether r carries the token (header) or the login
// cookie; why says what was wrong, without any of the secret.
func (a *Auth) check(r *http.Request) (bool, string) {
	if vals := r.Header.Values("Authorization"); len(vals) > 0 {
		if len(vals) > 1 {
			return false, "more than one Authorization header"
		}
		tok, ok := bearer(vals[0])
		if !ok {
			return false, "the Authorization header is not \"Bearer <token>\""
		}
		if !a.tokenEqual(tok) {
			return false, "wrong token"
		}
		return true, ""
	}
	c, err := r.Cookie(CookieName)
	if err != nil {
		return false, "no token"
	}
	if subtle.ConstantTimeCompare([]byte(c.Value), []byte(a.cookie)) != 1 {
		return false, "stale or wrong login cookie"
	}
	return true, ""
}

func (a *Auth) tokenEqual(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) == 1
}

// bearer extracts the token of an "Authorization: Bearer <token>" value
// (the scheme is case-insensitive, RFC 9110 §11.1).
func bearer(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimLeft(tok, " ")
	if tok == "" || strings.ContainsAny(tok, " \t") {
		return "", false
	}
	return tok, true
}

func (a *Auth) refuse(w http.ResponseWriter, why string) {
	if why == "no token" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="metis"`)
		WriteError(w, http.StatusUnauthorized, CodeUnauthorized,
			"this server needs its bearer token: send Authorization: Bearer <token> (the token is in the server's token file), or log in with POST /login")
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="metis", error="invalid_token"`)
	WriteError(w, http.StatusUnauthorized, CodeUnauthorized, "the token was refused: "+why)
}

type loginBody struct {
	Token string `json:"token"`
}

func (a *Auth) login(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		serveLoginPage(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, HEAD, POST")
		WriteError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" is not allowed here")
		return
	}
	var body loginBody
	if !decode(w, r, &body, !a.required) {
		return
	}
	if !a.required {
		writeJSON(w, http.StatusOK, map[string]bool{"token_required": false})
		return
	}
	if body.Token == "" {
		a.refuse(w, "the body has no token")
		return
	}
	if !a.tokenEqual(body.Token) {
		a.log.Info("refused a login with a wrong token", "remote", r.RemoteAddr)
		a.refuse(w, "wrong token")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: a.cookie, Path: "/", MaxAge: cookieMaxAge,
		HttpOnly: true, Secure: a.secureFor(r), SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, map[string]bool{"token_required": true})
}

// secureFor reports whether the cookie for r is Secure: the server speaks
// TLS, or r came by a public name declared https (a TLS proxy).
func (a *Auth) secureFor(r *http.Request) bool {
	return a.secure || PageScheme(r) == "https"
}

func (a *Auth) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		WriteError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" is not allowed here")
		return
	}
	// Drain a small body so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxLogoutBody))
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: a.secureFor(r), SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// isPageLoad reports whether r is a browser opening the dashboard's page
// (GET / with no Authorization header): such a request without the login
// cookie is sent to the login page instead of a JSON 401. Every other
// request, API and assets included, gets the 401.
func isPageLoad(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/" || r.URL.Path == "/index.html") &&
		r.Header.Get("Authorization") == ""
}
