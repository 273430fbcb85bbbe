package api

import (
	"net/http"
	"net/url"

	"github.com/metis-agent/metis/internal/session"
)

// attachInfo is the answer of GET /sessions/{id} (spec §3.1), extended
// with the session summary.
type attachInfo struct {
	SessionID   string          `json:"session_id"`
	ActiveModel string          `json:"active_model"`
	AttachToken string          `json:"attach_token"`
	WSURL       string          `json:"ws_url"`
	Session     session.Summary `json:"session"`
}

func (a *API) createSession(w http.ResponseWriter, r *http.Request) {
	var req session.CreateRequest
	if !decode(w, r, &req, false) {
		return
	}
	s, err := a.sessions.Create(r.Context(), req)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	w.Header().Set("Location", "/sessions/"+s.ID)
	writeJSON(w, http.StatusCreated, s)
}

func (a *API) listSessions(w http.ResponseWriter, r *http.Request) {
	ss, err := a.sessions.List(r.Context())
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	if ss == nil {
		ss = []session.Summary{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": ss})
}

func (a *API) getSession(w http.ResponseWriter, r *http.Request) {
	s, err := a.sessions.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	tok := a.tokens.Issue(s.ID)
	scheme := "ws"
	if PageScheme(r) == "https" {
		scheme = "wss"
	}
	u := url.URL{Scheme: scheme, Host: r.Host, Path: "/sessions/" + s.ID + "/stream", RawQuery: url.Values{"attach": {tok}}.Encode()}
	writeJSON(w, http.StatusOK, attachInfo{SessionID: s.ID, ActiveModel: s.ActiveModel, AttachToken: tok, WSURL: u.String(), Session: s})
}
