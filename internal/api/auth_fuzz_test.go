package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/login"
)

const fuzzToken = "fuzz-token-0123456789-abcdefghijk"

// FuzzAuth throws arbitrary Authorization and Cookie headers and /login
// bodies at the token middleware: it never panics, lets a request
// through only with the exact token (or the cookie of a login), answers
// every refusal with a 401 JSON error, and never echoes what it was
// sent.
func FuzzAuth(f *testing.F) {
	for _, s := range [][3]string{
		{"Bearer " + fuzzToken, "", ""},
		{"bearer  " + fuzzToken, "", ""},
		{"Bearer " + fuzzToken + "x", "", ""},
		{"Basic " + fuzzToken, "", ""},
		{"", api.CookieName + "=x", ""},
		{"", "", `{"token":"` + fuzzToken + `"}`},
		{"", "", `{"token":"nope-nope-nope-nope"}`},
		{"", "", `{"token":1}`},
		{"Bearer", "a=b; " + api.CookieName + "=", "{"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	// A limiter that never limits: this fuzzes the checks, not the
	// limit (auth_limit_test.go).
	auth, err := api.NewAuth(context.Background(), api.AuthConfig{Token: fuzzToken, Log: slog.New(slog.DiscardHandler),
		Limiter: login.NewLimiter(1<<30, time.Nanosecond, 0, nil)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(auth.Close)
	h := auth.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "inner") }))
	login := httptest.NewRecorder()
	h.ServeHTTP(login, httptest.NewRequest("POST", "/login", strings.NewReader(`{"token":"`+fuzzToken+`"}`)))
	cookie := login.Result().Cookies()[0].Value

	f.Fuzz(func(t *testing.T, authz, cookieHdr, body string) {
		r := httptest.NewRequest("GET", "/sessions", nil)
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		if cookieHdr != "" {
			r.Header.Set("Cookie", cookieHdr)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		scheme, rest, _ := strings.Cut(strings.TrimSpace(authz), " ")
		exact := strings.EqualFold(scheme, "Bearer") && strings.TrimLeft(rest, " ") == fuzzToken
		byCookie := authz == "" && strings.Contains(cookieHdr, cookie)
		switch {
		case w.Code == http.StatusOK:
			if !exact && !byCookie {
				t.Fatalf("let through with Authorization %q Cookie %q", authz, cookieHdr)
			}
		case w.Code == http.StatusUnauthorized:
			if exact && !strings.ContainsAny(authz, "\r\n") {
				t.Fatalf("refused the exact token: %q", authz)
			}
			checkRefusal(t, w)
		default:
			t.Fatalf("status %d", w.Code)
		}

		lr := httptest.NewRequest("POST", "/login", strings.NewReader(body))
		lw := httptest.NewRecorder()
		h.ServeHTTP(lw, lr)
		switch lw.Code {
		case http.StatusOK:
			if !strings.Contains(body, fuzzToken) && !strings.Contains(body, `\u`) {
				t.Fatalf("login accepted %q", body)
			}
		case http.StatusUnauthorized, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if len(lw.Result().Cookies()) != 0 {
				t.Fatalf("a refused login set a cookie: %q", body)
			}
		default:
			t.Fatalf("login status %d for %q", lw.Code, body)
		}
	})
}

// checkRefusal checks a 401's headers, and that its message is one of
// the fixed ones (so it echoes nothing it was sent).
func checkRefusal(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	if !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer ") || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("refusal headers %v", w.Header())
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code != api.CodeUnauthorized {
		t.Fatalf("refusal body %s", w.Body)
	}
	why, refused := strings.CutPrefix(e.Error.Message, "the token was refused: ")
	switch {
	case !refused && strings.HasPrefix(e.Error.Message, "this server needs its bearer token"):
	case refused && (why == "wrong token" || why == "more than one Authorization header" ||
		why == `the Authorization header is not "Bearer <token>"` || strings.HasPrefix(why, "the login session has ended")):
	default:
		t.Fatalf("unexpected refusal message %q", e.Error.Message)
	}
}
