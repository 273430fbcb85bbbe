package api

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/protocol"
)

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

// Session page bounds of GET /sessions.
const (
	defaultSessionPage = 100
	maxSessionPage     = 1000
)

func (a *API) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultSessionPage
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxSessionPage {
			WriteError(w, http.StatusBadRequest, CodeInvalidRequest, "limit must be an integer from 1 to "+strconv.Itoa(maxSessionPage))
			return
		}
		limit = n
	}
	p, err := a.sessions.ListPage(r.Context(), q.Get("before"), limit)
	if err != nil {
		a.writeErr(w, r, err)
		return
	}
	if p.Sessions == nil {
		p.Sessions = []session.Summary{}
	}
	writeJSON(w, http.StatusOK, protocol.SessionList{Sessions: p.Sessions, HasMore: p.Next != "", Next: p.Next})
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
	writeJSON(w, http.StatusOK, protocol.AttachInfo{SessionID: s.ID, ActiveModel: s.ActiveModel, AttachToken: tok, WSURL: u.String(), Session: s})
}
