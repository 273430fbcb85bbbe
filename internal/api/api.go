package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/metis-agent/metis/internal/attach"
	"github.com/metis-agent/metis/internal/session"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 2 << 20

// API serves contract §3.
type API struct {
	sessions *session.Manager
	tokens   *attach.Registry
	log      *slog.Logger
	mux      *http.ServeMux
}

// New returns the API with its routes registered on a fresh mux.
func New(m *session.Manager, tokens *attach.Registry, log *slog.Logger) *API {
	if log == nil {
		log = slog.Default()
	}
	a := &API{sessions: m, tokens: tokens, log: log, mux: http.NewServeMux()}
	a.route("/sessions", map[string]http.HandlerFunc{"GET": a.listSessions, "POST": a.createSession})
	a.route("/sessions/{id}", map[string]http.HandlerFunc{"GET": a.getSession, "PATCH": a.patchSession, "DELETE": a.deleteSession})
	a.route("/models", map[string]http.HandlerFunc{"GET": a.models})
	a.route("/sessions/{id}/turns", map[string]http.HandlerFunc{"POST": a.submitTurn, "GET": a.listTurns})
	a.route("/sessions/{id}/turns/{turn_id}/cancel", map[string]http.HandlerFunc{"POST": a.cancelTurn})
	a.route("/sessions/{id}/turns/{turn_id}/feedback", map[string]http.HandlerFunc{"POST": a.feedback})
	a.route("/sessions/{id}/messages", map[string]http.HandlerFunc{"GET": a.messages})
	a.route("/sessions/{id}/compact", map[string]http.HandlerFunc{"POST": a.compact})
	a.route("/sessions/{id}/system-prompt", map[string]http.HandlerFunc{"GET": a.systemPrompt})
	a.checkpointRoutes() // checkpoints.go
	a.route("/sessions/{id}/images/{sha256}", map[string]http.HandlerFunc{"GET": a.image})
	a.route("/sessions/{id}/approvals/{approval_id}", map[string]http.HandlerFunc{"POST": a.approve})
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, CodeNotFound, "no such endpoint: "+r.URL.Path)
	})
	return a
}

// Route registers handlers for path by method, answering other methods
// with a JSON 405. Other edges (the streaming server) mount their
// endpoints through it.
func (a *API) Route(path string, byMethod map[string]http.HandlerFunc) { a.route(path, byMethod) }

func (a *API) route(path string, byMethod map[string]http.HandlerFunc) {
	allow := make([]string, 0, len(byMethod))
	for m, h := range byMethod {
		a.mux.HandleFunc(m+" "+path, h)
		allow = append(allow, m)
	}
	a.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		WriteError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" is not allowed here")
	})
}

// ServeHTTP implements http.Handler (without the Guard: wrap it).
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// jsonSpace is the whitespace JSON allows around a value (RFC 8259).
const jsonSpace = " \t\r\n"

// decode reads a JSON object body of at most MaxBodyBytes into v. An
// empty body is allowed only if emptyOK. It writes the error response
// itself and reports false.
func decode(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) bool {
	return decodeLimit(w, r, v, emptyOK, MaxBodyBytes)
}

// decodeLimit is decode with a body limit of its own.
func decodeLimit(w http.ResponseWriter, r *http.Request, v any, emptyOK bool, limit int64) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			WriteError(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge, fmt.Sprintf("body exceeds %d bytes", limit))
			return false
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			WriteError(w, http.StatusRequestTimeout, CodeRequestTimeout, "the body did not arrive in time")
			return false
		}
		WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "could not read the body: "+err.Error())
		return false
	}
	if len(strings.Trim(string(body), jsonSpace)) == 0 {
		if emptyOK {
			return true
		}
		WriteError(w, http.StatusBadRequest, CodeInvalidJSON, "the body is empty; send a JSON object")
		return false
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	if err := dec.Decode(v); err != nil {
		WriteError(w, http.StatusBadRequest, CodeInvalidJSON, "the body is not the expected JSON object: "+err.Error())
		return false
	}
	// dec.More is not enough: it reports false for a stray '}' or ']'.
	// Only JSON's own whitespace may follow: strings.TrimSpace would also
	// let a \f, \v or U+00A0 through.
	if rest := body[dec.InputOffset():]; len(strings.Trim(string(rest), jsonSpace)) != 0 {
		WriteError(w, http.StatusBadRequest, CodeInvalidJSON, "the body has data after the JSON object")
		return false
	}
	return true
}
