package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/metis-agent/metis/internal/login"
	"github.com/metis-agent/metis/protocol"
)

// CodeUnauthorized is the error code of a request that lacks the bearer
// token (or carries a wrong one).
const CodeUnauthorized = protocol.CodeUnauthorized

// CodeTooManyRequests answers an address that made too many attempts
// with a wrong token (429, Retry-After).
const CodeTooManyRequests = protocol.CodeTooManyRequests

// The login cookie's names. Over https it is __Host- prefixed: a
// browser keeps such a cookie only when it is Secure, for Path=/ and
// without a Domain, so no other host (a sibling subdomain included) can
// set or overwrite it. Over plain http (a loopback server, a server on
// a LAN without TLS) a browser refuses a __Host- cookie, which needs
// Secure, so the plain name is used there.
const (
	CookieName       = "metis_session"
	SecureCookieName = "__Host-" + CookieName
)

// maxLogoutBody is how much of a POST /logout body is drained.
const maxLogoutBody = 4096

// AuthConfig configures NewAuth.
type AuthConfig struct {
	// Token is the server's bearer token; "" requires none.
	Token string
	// TLS says the server speaks TLS: its login cookie is Secure and
	// __Host- prefixed.
	TLS bool
	// Logins keeps the login sessions across restarts (the trace
	// store); nil keeps them in memory only.
	Logins login.Store
	// Sessions sets the sessions' lifetimes (defaults: 7 days idle, 30
	// days at most).
	Sessions login.Options
	// Limiter limits attempts with a wrong token per remote address; nil
	// is the default (10 at once, then one a second).
	Limiter *login.Limiter
	// RefusalLogEvery is how often at most a summary of refused attempts
	// is logged (default a minute).
	RefusalLogEvery time.Duration
	Log             *slog.Logger
}

// Auth requires the server's bearer token on every request it wraps: an
// "Authorization: Bearer <token>" header, or the cookie of a login
// session that POST /login started for a browser (which cannot put a
// header on a WebSocket upgrade or a page load). Missing or wrong is 401
// with the JSON error body and a WWW-Authenticate: Bearer header.
// Comparisons take constant time, and the token is never logged or
// echoed.
//
// Logins are limited per remote address: past the limiter's burst of
// wrong tokens, POST /login is answered 429 with Retry-After, right
// token or wrong. Refused tokens (by /login or in an Authorization
// header) are logged as one summary line at most once a minute rather
// than a line each.
//
// Auth also serves endpoints of its own, which need no token:
//   - GET /login: a small page with a form that posts the token;
//   - POST /login {"token": "..."}: checks the token, starts a login
//     session and sets its HttpOnly, SameSite=Strict cookie (Secure and
//     __Host- prefixed over https);
//   - POST /logout: ends the session of the cookie sent and clears it.
//
// An Auth without a token lets everything through and answers /login
// with token_required false.
type Auth struct {
	tokenSum [32]byte // sha256 of the token: equal lengths for the comparison
	required bool
	tls      bool
	sessions *login.Sessions // nil when no token is required
	limit    *login.Limiter
	refused  *refusalLog
	log      *slog.Logger
}

// NewAuth returns the middleware for cfg, with the login sessions of
// cfg.Token loaded from cfg.Logins (sessions of another token are
// dropped there). Close it when the server stops.
func NewAuth(ctx context.Context, cfg AuthConfig) (*Auth, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Limiter == nil {
		cfg.Limiter = login.NewLimiter(0, 0, 0, nil)
	}
	a := &Auth{tls: cfg.TLS, log: cfg.Log, limit: cfg.Limiter, refused: newRefusalLog(cfg.Log, cfg.RefusalLogEvery)}
	if cfg.Token == "" {
		return a, nil
	}
	a.required = true
	a.tokenSum = sha256.Sum256([]byte(cfg.Token))
	if cfg.Sessions.Logger == nil {
		cfg.Sessions.Logger = cfg.Log
	}
	var err error
	if a.sessions, err = login.New(ctx, cfg.Token, cfg.Logins, cfg.Sessions); err != nil {
		return nil, err
	}
	return a, nil
}

// Close logs what the refusal summary still holds and stops its timer.
func (a *Auth) Close() { a.refused.close() }

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
			if v := a.check(r); !v.ok {
				a.log.Debug("refused a request without a valid token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "why", v.why)
				if isPageLoad(r) {
					// A person opening the dashboard: the login page,
					// which comes back to it.
					http.Redirect(w, r, "/login", http.StatusSeeOther)
					return
				}
				a.refuse(w, v.why)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// verdict is what check found: ok, or why not (without any of the
// secret).
type verdict struct {
	ok  bool
	why string
}

// check looks at r's credentials: the bearer token (one Authorization
// header), else the login session's cookie.
func (a *Auth) check(r *http.Request) verdict {
	if vals := r.Header.Values("Authorization"); len(vals) > 0 {
		// Not limited per address, unlike POST /login: programs that hold
		// the token send it on every request, and behind a reverse proxy
		// every client has the proxy's address, so one client's wrong
		// tokens would lock the others out. Counted in the summary.
		if why := a.bearerWrong(vals); why != "" {
			a.refused.add(r.RemoteAddr, false)
			return verdict{why: why}
		}
		return verdict{ok: true}
	}
	c, err := r.Cookie(a.cookieName(r))
	if err != nil {
		return verdict{why: "no token"}
	}
	if !a.sessions.Check(r.Context(), c.Value) {
		return verdict{why: "the login session has ended (logged out, expired, or the token changed): log in again"}
	}
	return verdict{ok: true}
}

// bearerWrong says what is wrong with the Authorization header values,
// "" when they carry the token.
func (a *Auth) bearerWrong(vals []string) string {
	if len(vals) > 1 {
		return "more than one Authorization header"
	}
	tok, ok := bearer(vals[0])
	if !ok {
		return "the Authorization header is not \"Bearer <token>\""
	}
	if !a.tokenEqual(tok) {
		return "wrong token"
	}
	return ""
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

// tooMany answers an address that must wait before its next attempt.
func (a *Auth) tooMany(w http.ResponseWriter, wait time.Duration) {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	WriteError(w, http.StatusTooManyRequests, CodeTooManyRequests,
		fmt.Sprintf("too many attempts with a wrong token from this address: try again in %d s", secs))
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
	key := login.AddressKey(r.RemoteAddr)
	if ok, retry := a.limit.Take(key); !ok {
		a.refused.add(r.RemoteAddr, true)
		a.tooMany(w, retry)
		return
	}
	if body.Token == "" || !a.tokenEqual(body.Token) {
		a.refused.add(r.RemoteAddr, false)
		if body.Token == "" {
			a.refuse(w, "the body has no token")
		} else {
			a.refuse(w, "wrong token")
		}
		return
	}
	a.limit.Refund(key)
	id, maxAge, err := a.sessions.Create(r.Context())
	if err != nil {
		a.log.Error("start a login session", "err", err)
		WriteError(w, http.StatusInternalServerError, CodeInternal, "the login session could not be stored; try again")
		return
	}
	http.SetCookie(w, a.cookie(r, id, int(maxAge/time.Second)))
	writeJSON(w, http.StatusOK, map[string]bool{"token_required": true})
}

// cookie is the login cookie for r: value, max age in seconds (-1
// clears it).
func (a *Auth) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: a.cookieName(r), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: a.secureFor(r), SameSite: http.SameSiteStrictMode}
}

// cookieName is the login cookie's name for r's scheme.
func (a *Auth) cookieName(r *http.Request) string {
	if a.secureFor(r) {
		return SecureCookieName
	}
	return CookieName
}

// secureFor reports whether the cookie for r is Secure: the client
// reached the server over https (its own TLS, or a TLS proxy in front of
// a public name declared https).
func (a *Auth) secureFor(r *http.Request) bool {
	return PageScheme(r) == "https" || a.tls && !OverSocket(r)
}

func (a *Auth) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		WriteError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" is not allowed here")
		return
	}
	// Drain a small body so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxLogoutBody))
	var err error
	if c, cerr := r.Cookie(a.cookieName(r)); cerr == nil && a.sessions != nil {
		err = a.sessions.Revoke(r.Context(), c.Value)
	}
	http.SetCookie(w, a.cookie(r, "", -1))
	if err != nil {
		a.log.Error("end a login session", "err", err)
		WriteError(w, http.StatusInternalServerError, CodeInternal, "the logout could not be stored; try again")
		return
	}
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
