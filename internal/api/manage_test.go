package api_test

import (
	"net/http"
	"testing"

	"github.com/metis-agent/metis/internal/servertest"
)

// TestRenameAndArchive: PATCH /sessions/{id} "title" renames a session
// (the first prompt no longer names it), "archived" marks it in the
// list and back; an empty title is 400, an unknown session 404.
func TestRenameAndArchive(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	var s map[string]any
	if st := h.Do("PATCH", "/sessions/"+sid, map[string]any{"title": "  my   session ", "archived": true}, &s); st != http.StatusOK ||
		s["title"] != "my session" || s["archived"] != true {
		t.Fatalf("patch: %d %v", st, s)
	}
	h.Submit(sid, "/echo hello")
	h.WaitTurn(sid)
	var list struct {
		Sessions []map[string]any `json:"sessions"`
	}
	if st := h.Do("GET", "/sessions", nil, &list); st != http.StatusOK || len(list.Sessions) != 1 ||
		list.Sessions[0]["title"] != "my session" || list.Sessions[0]["archived"] != true {
		t.Fatalf("list: %d %v", st, list)
	}
	s = nil
	if st := h.Do("PATCH", "/sessions/"+sid, map[string]any{"archived": false}, &s); st != http.StatusOK {
		t.Fatalf("unarchive: %d %v", st, s)
	}
	if _, ok := s["archived"]; ok {
		t.Fatalf("an unarchived summary holds archived: %v", s)
	}
	expectErr(t, do(t, h, req{method: "PATCH", path: "/sessions/" + sid, body: `{"title":"  "}`, header: harnessToken(h)}), 400, "invalid_request")
	expectErr(t, do(t, h, req{method: "PATCH", path: "/sessions/sess_nope", body: `{"title":"x"}`, header: harnessToken(h)}), 404, "session_not_found")
}

// TestDeleteSession: DELETE /sessions/{id} answers 204 and the session,
// its history and its events are gone (404 after); a second DELETE is 404.
func TestDeleteSession(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	keep := h.CreateSession()
	h.Submit(sid, "/echo bye")
	h.WaitTurn(sid)
	r := do(t, h, req{method: "DELETE", path: "/sessions/" + sid, header: harnessToken(h)})
	if r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	expectErr(t, get(t, h, "/sessions/"+sid), 404, "session_not_found")
	expectErr(t, get(t, h, "/sessions/"+sid+"/messages"), 404, "session_not_found")
	expectErr(t, do(t, h, req{method: "DELETE", path: "/sessions/" + sid, header: harnessToken(h)}), 404, "session_not_found")
	if n := sessionCount(t, h); n != 1 {
		t.Fatalf("%d sessions left, want 1 (%s)", n, keep)
	}
}

// TestModels: GET /models lists the default model first and, with no
// provider key, the offline demo; the keyless providers are listed as
// unavailable with a reason.
func TestModels(t *testing.T) {
	h := servertest.Start(t, "")
	var m struct {
		Default string `json:"default"`
		Models  []struct {
			ID       string `json:"id"`
			Provider string `json:"provider"`
		} `json:"models"`
		Unavailable []struct {
			Provider string `json:"provider"`
			Reason   string `json:"reason"`
		} `json:"unavailable"`
	}
	if st := h.Do("GET", "/models", nil, &m); st != http.StatusOK {
		t.Fatalf("GET /models: %d", st)
	}
	if len(m.Models) == 0 || m.Models[0].ID != m.Default {
		t.Fatalf("the default %q is not first: %+v", m.Default, m.Models)
	}
	demo := false
	for _, x := range m.Models {
		demo = demo || x.ID == "builtin:demo" && x.Provider == "builtin"
	}
	if !demo {
		t.Fatalf("builtin:demo missing: %+v", m.Models)
	}
	for _, u := range m.Unavailable {
		if u.Provider == "" || u.Reason == "" {
			t.Fatalf("unavailable without a reason: %+v", m.Unavailable)
		}
	}
}
