package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
)

// summaryFields are the session summary's fields (contract §3, spec
// §3.4) with the JSON kind each must have.
var summaryFields = map[string]string{
	"id":                     "string",
	"workspace_path":         "string",
	"active_model":           "string",
	"routing_policy_version": "string",
	"cost_so_far_usd":        "number",
	"turn_count":             "number",
	"current_turn_id":        "null",
	"current_turn_status":    "null",
	"parent_session_id":      "null",
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "?"
}

func checkFreshSummary(t *testing.T, s map[string]any, workspace string) {
	t.Helper()
	for f, k := range summaryFields {
		v, ok := s[f]
		if !ok {
			t.Errorf("summary lacks %q: %v", f, s)
			continue
		}
		if kind(v) != k {
			t.Errorf("summary %q = %#v, want a %s", f, v, k)
		}
	}
	if id, _ := s["id"].(string); !strings.HasPrefix(id, "sess_") {
		t.Errorf("id %q", id)
	}
	if s["workspace_path"] != workspace {
		t.Errorf("workspace_path %v, want %s", s["workspace_path"], workspace)
	}
	if s["active_model"] != "builtin:demo" {
		t.Errorf("active_model %v", s["active_model"])
	}
	if v, _ := s["routing_policy_version"].(string); v == "" {
		t.Error("empty routing_policy_version")
	}
	if s["cost_so_far_usd"] != 0.0 || s["turn_count"] != 0.0 {
		t.Errorf("fresh session cost %v, turns %v", s["cost_so_far_usd"], s["turn_count"])
	}
}

// TestSessionShapes checks the success answers of POST /sessions, GET
// /sessions and GET /sessions/{id}.
func TestSessionShapes(t *testing.T) {
	h := servertest.Start(t, "")
	hp := hostPort(t, h)

	if n := sessionCount(t, h); n != 0 {
		t.Fatalf("fresh server lists %d sessions", n)
	}
	r := get(t, h, "/sessions")
	if strings.TrimSpace(string(r.body)) != `{"sessions":[],"has_more":false}` {
		t.Errorf("empty list %s", r.body)
	}

	// Create: 201 with the summary; a non-clean path is cleaned, the
	// model may be given, a charset parameter is fine.
	r = post(t, h, "/sessions", map[string]string{"workspace_path": h.Workspace})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	var first map[string]any
	r.decode(t, &first)
	checkFreshSummary(t, first, h.Workspace)
	id1 := first["id"].(string)
	if loc := r.header.Get("Location"); loc != "/sessions/"+id1 {
		t.Errorf("Location %q", loc)
	}

	unclean := filepath.Join(h.Workspace, "src") + "/../"
	r = do(t, h, req{method: "POST", path: "/sessions", contentType: "Application/JSON; charset=utf-8",
		body: `{"workspace_path":` + jsonString(t, unclean) + `,"model":"builtin:demo","unknown_field":1}`})
	if r.status != http.StatusCreated {
		t.Fatalf("create with model: %d %s", r.status, r.body)
	}
	var second map[string]any
	r.decode(t, &second)
	checkFreshSummary(t, second, h.Workspace)
	id2 := second["id"].(string)
	if id1 == id2 {
		t.Fatal("two sessions share an id")
	}

	// List: both, newest first, same shape.
	var list struct {
		Sessions []map[string]any `json:"sessions"`
	}
	r = get(t, h, "/sessions")
	if r.status != 200 {
		t.Fatalf("list: %d", r.status)
	}
	r.decode(t, &list)
	if len(list.Sessions) != 2 || list.Sessions[0]["id"] != id2 || list.Sessions[1]["id"] != id1 {
		t.Fatalf("list %v", list.Sessions)
	}
	for _, s := range list.Sessions {
		checkFreshSummary(t, s, h.Workspace)
	}

	// Get: attach info with a fresh token each time.
	type attachInfo struct {
		SessionID   *string        `json:"session_id"`
		ActiveModel *string        `json:"active_model"`
		AttachToken *string        `json:"attach_token"`
		WSURL       *string        `json:"ws_url"`
		Session     map[string]any `json:"session"`
	}
	tokens := map[string]bool{}
	for _, host := range []string{"", "localhost:" + port(t, hp), "[::1]:" + port(t, hp)} {
		for range 2 {
			r := do(t, h, req{method: "GET", path: "/sessions/" + id1, host: host})
			if r.status != 200 {
				t.Fatalf("get (Host %q): %d %s", host, r.status, r.body)
			}
			var a attachInfo
			r.decode(t, &a)
			if a.SessionID == nil || *a.SessionID != id1 || a.ActiveModel == nil || *a.ActiveModel != "builtin:demo" ||
				a.AttachToken == nil || a.WSURL == nil {
				t.Fatalf("attach info %s", r.body)
			}
			tok := *a.AttachToken
			if !strings.HasPrefix(tok, "atk_") || len(tok) < 20 {
				t.Errorf("attach token %q", tok)
			}
			if tokens[tok] {
				t.Errorf("token %q issued twice", tok)
			}
			tokens[tok] = true
			wantHost := host
			if wantHost == "" {
				wantHost = hp
			}
			want := "ws://" + wantHost + "/sessions/" + id1 + "/stream?attach=" + url.QueryEscape(tok)
			if *a.WSURL != want {
				t.Errorf("ws_url %q, want %q", *a.WSURL, want)
			}
			u, err := url.Parse(*a.WSURL)
			if err != nil || u.Query().Get("attach") != tok {
				t.Errorf("ws_url %q does not carry the token: %v", *a.WSURL, err)
			}
			if a.Session != nil {
				checkFreshSummary(t, a.Session, h.Workspace)
			}
		}
	}
}

func port(t *testing.T, hostport string) string {
	t.Helper()
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 {
		t.Fatalf("no port in %q", hostport)
	}
	return hostport[i+1:]
}

// TestSummaryTracksTurns: after a turn the summary counts it and names
// no current turn.
func TestSummaryTracksTurns(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	h.Submit(sid, "/echo one")
	h.WaitTurn(sid)
	var info struct {
		Session map[string]any `json:"session"`
	}
	servertest.WaitFor(t, "turn_count 1", func() bool {
		get(t, h, "/sessions/"+sid).decode(t, &info)
		return info.Session["turn_count"] == 1.0
	})
	if info.Session["current_turn_id"] != nil || info.Session["current_turn_status"] != nil {
		t.Errorf("after the turn: %v", info.Session)
	}
	var list struct {
		Sessions []map[string]any `json:"sessions"`
	}
	get(t, h, "/sessions").decode(t, &list)
	if len(list.Sessions) != 1 || list.Sessions[0]["turn_count"] != 1.0 {
		t.Errorf("list after the turn: %v", list.Sessions)
	}
}

// TestEarlyCancel cancels each turn the moment its turn.started is
// delivered live, as a WebSocket client that saw it could, possibly
// before POST /turns has answered. Whatever the timing, the cancel must
// be honoured: 202 cancelling, and the turn ends with turn.cancelled.
func TestEarlyCancel(t *testing.T) {
	h := servertest.Start(t, "", withDemoDelay(5*time.Millisecond))
	sid := h.CreateSession()
	results := make(chan cancelAnswer, 1)
	h.Server.Bus.AddLive(&cancelOnStart{fire: func(turn string) {
		go func() {
			r := post(t, h, "/sessions/"+sid+"/turns/"+turn+"/cancel", map[string]string{"reason": "early"})
			var a cancelAnswer
			if r.status != http.StatusAccepted {
				t.Errorf("early cancel: %d %s", r.status, r.body)
			} else {
				r.decode(t, &a)
			}
			results <- a
		}()
	}})
	for i := range 10 {
		turn := h.Submit(sid, "/long 100")
		a := <-results
		h.WaitTurn(sid)
		if a.Status != "cancelling" {
			t.Fatalf("round %d: early cancel answered %+v", i, a)
		}
		var ended string
		for _, ev := range h.Live.Events(sid) {
			if ev.TurnID == turn && (ev.Type == event.TurnCancelled || ev.Type == event.TurnCompleted) {
				var p struct {
					Reason string `json:"reason"`
				}
				json.Unmarshal(ev.Payload, &p)
				ended = string(ev.Type) + ":" + p.Reason
			}
		}
		if ended != "turn.cancelled:early" {
			t.Fatalf("round %d: turn ended %q", i, ended)
		}
	}
}

// cancelOnStart is a live sink that calls fire with the turn id of every
// turn.started (fire must not block).
type cancelOnStart struct {
	fire func(turn string)
}

func (c *cancelOnStart) Publish(ev *event.Event) {
	if ev.Type == event.TurnStarted {
		c.fire(ev.TurnID)
	}
}
