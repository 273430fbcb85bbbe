package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/session"
)

func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCreateSessionErrors covers every refusal of POST /sessions; none of
// them may create a session.
func TestCreateSessionErrors(t *testing.T) {
	h := servertest.Start(t, "")
	ws := jsonString(t, h.Workspace)
	file := filepath.Join(h.Workspace, "README.md")
	valid := `{"workspace_path":` + ws + `}`

	cases := []struct {
		name   string
		ct     string // "" = application/json
		noCT   bool
		body   string
		status int
		code   string
	}{
		{name: "no content type", noCT: true, body: valid, status: 415, code: api.CodeUnsupportedMedia},
		{name: "text/plain", ct: "text/plain", body: valid, status: 415, code: api.CodeUnsupportedMedia},
		{name: "text/plain json-ish", ct: "text/plain; charset=utf-8", body: valid, status: 415, code: api.CodeUnsupportedMedia},
		{name: "form", ct: "application/x-www-form-urlencoded", body: valid, status: 415, code: api.CodeUnsupportedMedia},
		{name: "multipart", ct: "multipart/form-data; boundary=x", body: valid, status: 415, code: api.CodeUnsupportedMedia},
		{name: "json suffix", ct: "application/jsonx", body: valid, status: 415, code: api.CodeUnsupportedMedia},
		{name: "json-ld", ct: "application/ld+json", body: valid, status: 415, code: api.CodeUnsupportedMedia},
		{name: "unparsable content type", ct: "application/json; =", body: valid, status: 415, code: api.CodeUnsupportedMedia},

		{name: "empty body", body: "", status: 400, code: api.CodeInvalidJSON},
		{name: "blank body", body: " \n\t ", status: 400, code: api.CodeInvalidJSON},
		{name: "malformed", body: `{"workspace_path":`, status: 400, code: api.CodeInvalidJSON},
		{name: "not json", body: `workspace_path=/tmp`, status: 400, code: api.CodeInvalidJSON},
		{name: "trailing garbage", body: valid + ` x`, status: 400, code: api.CodeInvalidJSON},
		{name: "trailing brace", body: valid + `}`, status: 400, code: api.CodeInvalidJSON},
		{name: "trailing bracket", body: valid + ` ]`, status: 400, code: api.CodeInvalidJSON},
		{name: "trailing comma", body: valid + `,`, status: 400, code: api.CodeInvalidJSON},
		{name: "two objects", body: valid + valid, status: 400, code: api.CodeInvalidJSON},
		{name: "array", body: `[` + valid + `]`, status: 400, code: api.CodeInvalidJSON},
		{name: "string", body: ws, status: 400, code: api.CodeInvalidJSON},
		{name: "wrong field type", body: `{"workspace_path":5}`, status: 400, code: api.CodeInvalidJSON},
		{name: "wrong model type", body: `{"workspace_path":` + ws + `,"model":true}`, status: 400, code: api.CodeInvalidJSON},

		{name: "missing workspace", body: `{}`, status: 400, code: api.CodeInvalidRequest},
		{name: "null body", body: `null`, status: 400, code: api.CodeInvalidRequest},
		{name: "empty workspace", body: `{"workspace_path":""}`, status: 400, code: api.CodeInvalidRequest},
		{name: "relative workspace", body: `{"workspace_path":"workspace"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "dot-relative workspace", body: `{"workspace_path":"./workspace"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "nonexistent dir", body: `{"workspace_path":` + jsonString(t, filepath.Join(h.Workspace, "no-such-dir")) + `}`, status: 400, code: api.CodeInvalidRequest},
		{name: "regular file", body: `{"workspace_path":` + jsonString(t, file) + `}`, status: 400, code: api.CodeInvalidRequest},
		{name: "unknown provider", body: `{"workspace_path":` + ws + `,"model":"nope:x"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "malformed model", body: `{"workspace_path":` + ws + `,"model":"x"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "model without name", body: `{"workspace_path":` + ws + `,"model":"builtin:"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "model without provider", body: `{"workspace_path":` + ws + `,"model":":demo"}`, status: 400, code: api.CodeInvalidRequest},

		{name: "body over 2 MiB", body: `{"workspace_path":` + ws + `,"model":"` + strings.Repeat("x", api.MaxBodyBytes) + `"}`, status: 413, code: api.CodeBodyTooLarge},
		{name: "blank body over 2 MiB", body: strings.Repeat(" ", api.MaxBodyBytes+1), status: 413, code: api.CodeBodyTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, h, req{method: "POST", path: "/sessions", body: c.body, contentType: c.ct, noCT: c.noCT})
			expectErr(t, r, c.status, c.code)
		})
	}
	if n := sessionCount(t, h); n != 0 {
		t.Fatalf("refused requests created %d sessions", n)
	}
}

// TestCreateSessionBodyLimit: a body of exactly MaxBodyBytes is read; one
// byte more is refused.
func TestCreateSessionBodyLimit(t *testing.T) {
	h := servertest.Start(t, "")
	obj := `{"workspace_path":` + jsonString(t, h.Workspace) + `}`
	atLimit := obj + strings.Repeat(" ", api.MaxBodyBytes-len(obj))
	if r := do(t, h, req{method: "POST", path: "/sessions", body: atLimit}); r.status != http.StatusCreated {
		t.Fatalf("body of exactly %d bytes: %d %s", api.MaxBodyBytes, r.status, r.body)
	}
	r := do(t, h, req{method: "POST", path: "/sessions", body: atLimit + " "})
	expectErr(t, r, http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge)
	if n := sessionCount(t, h); n != 1 {
		t.Fatalf("%d sessions, want 1", n)
	}
}

// TestUnknownSession: every endpoint under /sessions/{id} answers 404
// session_not_found for an id that does not exist.
func TestUnknownSession(t *testing.T) {
	h := servertest.Start(t, "")
	real := h.CreateSession()
	for _, id := range []string{"sess_nope", "sess_01ARZ3NDEKTSV4RRFFQ69G5FAV", "x", strings.ToUpper(real), real + "x"} {
		t.Run(id, func(t *testing.T) {
			p := "/sessions/" + id
			expectErr(t, get(t, h, p), 404, api.CodeSessionNotFound)
			expectErr(t, get(t, h, p+"/messages"), 404, api.CodeSessionNotFound)
			expectErr(t, get(t, h, p+"/messages?limit=5&before=msg_x"), 404, api.CodeSessionNotFound)
			expectErr(t, post(t, h, p+"/turns", map[string]string{"content": "hello"}), 404, api.CodeSessionNotFound)
			expectErr(t, post(t, h, p+"/turns/turn_nope/cancel", map[string]string{"reason": "x"}), 404, api.CodeSessionNotFound)
			expectErr(t, post(t, h, p+"/turns/turn_nope/cancel", nil), 404, api.CodeSessionNotFound)
		})
	}
}

// TestSubmitTurnErrors covers the 400s of POST /sessions/{id}/turns; none
// of them starts a turn or stores a message.
func TestSubmitTurnErrors(t *testing.T) {
	// One image of at most 1,000 bytes: the turn body's limit is then
	// 2 MiB plus 1,400 bytes (docs/conversation.md).
	h := servertest.Start(t, "", func(c *config.Config) { c.MaxImages, c.MaxImageBytes = 1, 1000 })
	sid := h.CreateSession()
	p := "/sessions/" + sid + "/turns"
	cases := []struct {
		name   string
		ct     string
		noCT   bool
		body   string
		status int
		code   string
	}{
		{name: "no content type", noCT: true, body: `{"content":"hi"}`, status: 415, code: api.CodeUnsupportedMedia},
		{name: "text/plain", ct: "text/plain", body: `{"content":"hi"}`, status: 415, code: api.CodeUnsupportedMedia},
		{name: "empty body", body: ``, status: 400, code: api.CodeInvalidJSON},
		{name: "malformed", body: `{"content":`, status: 400, code: api.CodeInvalidJSON},
		{name: "trailing garbage", body: `{"content":"hi"}}`, status: 400, code: api.CodeInvalidJSON},
		{name: "trailing bracket", body: `{"content":"hi"}]`, status: 400, code: api.CodeInvalidJSON},
		{name: "content not a string", body: `{"content":5}`, status: 400, code: api.CodeInvalidJSON},
		{name: "content blocks", body: `{"content":[{"type":"text","text":"hi"}]}`, status: 400, code: api.CodeInvalidJSON},
		{name: "missing content", body: `{}`, status: 400, code: api.CodeInvalidRequest},
		{name: "misspelled content", body: `{"contents":"hi"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "null content", body: `{"content":null}`, status: 400, code: api.CodeInvalidRequest},
		{name: "null body", body: `null`, status: 400, code: api.CodeInvalidRequest},
		{name: "empty content", body: `{"content":""}`, status: 400, code: api.CodeInvalidRequest},
		{name: "whitespace content", body: `{"content":" \n\t\r "}`, status: 400, code: api.CodeInvalidRequest},
		{name: "content over the limit", body: `{"content":"` + strings.Repeat("a", session.MaxTurnContent+1) + `"}`, status: 400, code: api.CodeInvalidRequest},
		{name: "body over 2 MiB and the images' room", body: `{"content":"` + strings.Repeat("a", api.MaxBodyBytes+1400) + `"}`, status: 413, code: api.CodeBodyTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, h, req{method: "POST", path: p, body: c.body, contentType: c.ct, noCT: c.noCT})
			expectErr(t, r, c.status, c.code)
		})
	}
	var s struct {
		Session session.Summary `json:"session"`
	}
	get(t, h, "/sessions/"+sid).decode(t, &s)
	if s.Session.TurnCount != 0 || s.Session.CurrentTurnID != nil {
		t.Fatalf("refused submissions started a turn: %+v", s.Session)
	}
	var page struct {
		Messages []json.RawMessage `json:"messages"`
	}
	get(t, h, "/sessions/"+sid+"/messages").decode(t, &page)
	if len(page.Messages) != 0 {
		t.Fatalf("refused submissions stored %d messages", len(page.Messages))
	}
}

type cancelAnswer struct {
	TurnID string `json:"turn_id"`
	Status string `json:"status"`
}

func cancel(t *testing.T, h *servertest.Harness, sid, turn string, body any) cancelAnswer {
	t.Helper()
	r := post(t, h, "/sessions/"+sid+"/turns/"+turn+"/cancel", body)
	if r.status != http.StatusAccepted {
		t.Fatalf("cancel %s: %d %s", turn, r.status, r.body)
	}
	var a cancelAnswer
	r.decode(t, &a)
	if a.TurnID != turn {
		t.Errorf("cancel answer turn_id %q, want %q", a.TurnID, turn)
	}
	return a
}

// TestTurnInFlightAndCancel drives one long turn: a second submission is
// refused while it runs, cancel errors are reported, the first cancel
// cancels and later ones are redundant; once it ended, a new turn can
// start and a cancel of a completed turn says so.
func TestTurnInFlightAndCancel(t *testing.T) {
	h := servertest.Start(t, "", withDemoDelay(50*time.Millisecond))
	sid := h.CreateSession()
	other := h.CreateSession()
	turn := h.Submit(sid, "/long 200")
	if !strings.HasPrefix(turn, "turn_") {
		t.Errorf("turn id %q", turn)
	}

	// Another turn of the same session is refused; other sessions are not
	// affected.
	expectErr(t, post(t, h, "/sessions/"+sid+"/turns", map[string]string{"content": "/echo second"}), 409, api.CodeTurnInFlight)
	expectErr(t, post(t, h, "/sessions/"+sid+"/turns", map[string]string{"content": "/long 3"}), 409, api.CodeTurnInFlight)
	otherTurn := h.Submit(other, "/echo meanwhile")

	var info struct {
		Session session.Summary `json:"session"`
	}
	get(t, h, "/sessions/"+sid).decode(t, &info)
	if info.Session.CurrentTurnID == nil || *info.Session.CurrentTurnID != turn ||
		info.Session.CurrentTurnStatus == nil || *info.Session.CurrentTurnStatus != session.StatusInFlight {
		t.Errorf("running turn in summary: %+v", info.Session)
	}

	// Cancel errors while the turn runs.
	base := "/sessions/" + sid + "/turns/"
	expectErr(t, post(t, h, "/sessions/sess_nope/turns/"+turn+"/cancel", nil), 404, api.CodeSessionNotFound)
	expectErr(t, post(t, h, base+"turn_nope/cancel", nil), 404, api.CodeTurnNotFound)
	expectErr(t, post(t, h, base+otherTurn+"/cancel", nil), 404, api.CodeTurnNotFound)
	expectErr(t, post(t, h, "/sessions/"+other+"/turns/"+turn+"/cancel", nil), 404, api.CodeTurnNotFound)
	expectErr(t, post(t, h, base+turn+"/cancel", map[string]string{"reason": strings.Repeat("r", 201)}), 400, api.CodeInvalidRequest)
	expectErr(t, post(t, h, base+turn+"/cancel", `{"reason":`), 400, api.CodeInvalidJSON)
	expectErr(t, post(t, h, base+turn+"/cancel", `{"reason":5}`), 400, api.CodeInvalidJSON)
	expectErr(t, post(t, h, base+turn+"/cancel", `{} {}`), 400, api.CodeInvalidJSON)
	expectErr(t, do(t, h, req{method: "POST", path: base + turn + "/cancel", contentType: "text/plain"}), 415, api.CodeUnsupportedMedia)
	get(t, h, "/sessions/"+sid).decode(t, &info)
	if info.Session.CurrentTurnID == nil || *info.Session.CurrentTurnStatus != session.StatusInFlight {
		t.Fatalf("a refused cancel touched the turn: %+v", info.Session)
	}

	// The first cancel cancels (a reason of exactly 200 bytes is fine);
	// every later one is redundant, before and after the turn ended.
	if a := cancel(t, h, sid, turn, map[string]string{"reason": strings.Repeat("r", 200)}); a.Status != string(session.Cancelling) {
		t.Fatalf("first cancel: %+v", a)
	}
	if a := cancel(t, h, sid, turn, map[string]string{"reason": "again"}); a.Status != string(session.AlreadyCancelling) {
		t.Fatalf("second cancel: %+v", a)
	}
	h.WaitTurn(sid)
	if a := cancel(t, h, sid, turn, nil); a.Status != string(session.AlreadyCancelling) {
		t.Fatalf("cancel after the cancelled turn ended: %+v", a)
	}
	get(t, h, "/sessions/"+sid).decode(t, &info)
	if info.Session.CurrentTurnID != nil || info.Session.CurrentTurnStatus != nil {
		t.Fatalf("ended turn still current: %+v", info.Session)
	}

	// The session takes turns again; a completed turn is already_ended.
	next := h.Submit(sid, "/echo after")
	h.WaitTurn(sid)
	if a := cancel(t, h, sid, next, nil); a.Status != string(session.AlreadyEnded) {
		t.Fatalf("cancel of a completed turn: %+v", a)
	}
	if a := cancel(t, h, sid, next, `{}`); a.Status != string(session.AlreadyEnded) {
		t.Fatalf("cancel of a completed turn, empty object: %+v", a)
	}
	h.WaitTurn(other)
	if a := cancel(t, h, other, otherTurn, map[string]string{"reason": "late"}); a.Status != string(session.AlreadyEnded) {
		t.Fatalf("cancel of the other session's completed turn: %+v", a)
	}
	// The cancelled turn's reason reached turn.cancelled.
	servertest.WaitFor(t, "turn.cancelled", func() bool {
		for _, ev := range h.Live.Events(sid) {
			if ev.Type == event.TurnCancelled && ev.TurnID == turn {
				var p struct {
					Reason string `json:"reason"`
				}
				if err := json.Unmarshal(ev.Payload, &p); err != nil {
					t.Fatal(err)
				}
				if p.Reason != strings.Repeat("r", 200) {
					t.Fatalf("turn.cancelled reason %q", p.Reason)
				}
				return true
			}
		}
		return false
	})
}

// TestMessagesErrors covers the 400s and 404s of the messages endpoint.
func TestMessagesErrors(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	other := h.CreateSession()
	h.Submit(other, "/echo elsewhere")
	h.WaitTurn(other)
	var otherPage struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	get(t, h, "/sessions/"+other+"/messages").decode(t, &otherPage)
	if len(otherPage.Messages) == 0 {
		t.Fatal("no messages in the other session")
	}
	foreign := otherPage.Messages[0].ID

	base := "/sessions/" + sid + "/messages"
	for _, limit := range []string{"0", "-1", "501", "abc", "1.5", "1e2", "%20", "99999999999999999999"} {
		t.Run("limit="+limit, func(t *testing.T) {
			expectErr(t, get(t, h, base+"?limit="+limit), 400, api.CodeInvalidRequest)
		})
	}
	for _, limit := range []string{"1", "500"} {
		if r := get(t, h, base+"?limit="+limit); r.status != 200 {
			t.Errorf("limit=%s: %d %s", limit, r.status, r.body)
		}
	}
	expectErr(t, get(t, h, "/sessions/sess_nope/messages"), 404, api.CodeSessionNotFound)
	expectErr(t, get(t, h, base+"?before=msg_nope"), 404, api.CodeMessageNotFound)
	expectErr(t, get(t, h, base+"?before=msg_nope&limit=3"), 404, api.CodeMessageNotFound)
	// A message of another session is not a message of this one.
	expectErr(t, get(t, h, base+"?before="+foreign), 404, api.CodeMessageNotFound)

	var page struct {
		Messages []json.RawMessage `json:"messages"`
		HasMore  *bool             `json:"has_more"`
	}
	r := get(t, h, base)
	r.decode(t, &page)
	if r.status != 200 || page.Messages == nil || len(page.Messages) != 0 || page.HasMore == nil || *page.HasMore {
		t.Fatalf("empty session's messages: %d %s", r.status, r.body)
	}
}

// TestMethodNotAllowed: a known path with another method is 405 with an
// Allow header naming the methods it takes.
func TestMethodNotAllowed(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	cases := []struct {
		method, path string
		allow        []string
	}{
		{"DELETE", "/sessions", []string{"GET", "POST"}},
		{"PUT", "/sessions", []string{"GET", "POST"}},
		{"PATCH", "/sessions", []string{"GET", "POST"}},
		{"POST", "/sessions/" + sid, []string{"GET"}},
		{"PUT", "/sessions/" + sid, []string{"GET", "PATCH", "DELETE"}},
		{"DELETE", "/sessions/" + sid + "/turns", []string{"GET", "POST"}},
		{"PUT", "/sessions/" + sid + "/turns", []string{"GET", "POST"}},
		{"GET", "/sessions/" + sid + "/turns/turn_x/revert", []string{"POST"}},
		{"GET", "/sessions/" + sid + "/fork", []string{"POST"}},
		{"GET", "/sessions/" + sid + "/turns/turn_x/cancel", []string{"POST"}},
		{"DELETE", "/sessions/" + sid + "/turns/turn_x/cancel", []string{"POST"}},
		{"POST", "/sessions/" + sid + "/messages", []string{"GET"}},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			r := do(t, h, req{method: c.method, path: c.path, body: "{}"})
			expectErr(t, r, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
			allow := r.header.Get("Allow")
			if allow == "" {
				t.Fatal("no Allow header")
			}
			got := strings.Split(allow, ", ")
			for _, m := range c.allow {
				if !contains(got, m) {
					t.Errorf("Allow %q lacks %s", allow, m)
				}
			}
			if contains(got, c.method) {
				t.Errorf("Allow %q names the refused method", allow)
			}
		})
	}
	if n := sessionCount(t, h); n != 1 {
		t.Fatalf("%d sessions after refused methods", n)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestUnknownPath: paths outside the API are 404 not_found with the JSON
// error body. (GET / is the dashboard: internal/server/dashboard_test.go.)
func TestUnknownPath(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	for _, c := range []struct{ method, path string }{
		{"POST", "/"},
		{"GET", "/nope"},
		{"GET", "/session"},
		{"GET", "/sessions/"},
		{"GET", "/sessions/" + sid + "/nope"},
		{"GET", "/sessions/" + sid + "/turns/turn_x"},
		{"GET", "/sessions/" + sid + "/messages/extra"},
		{"POST", "/nope"},
		{"POST", "/sessions/" + sid + "/turns/"},
		{"GET", "/favicon.ico"},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			expectErr(t, do(t, h, req{method: c.method, path: c.path, body: "{}"}), 404, api.CodeNotFound)
		})
	}
}

// TestWorkspaceGone: a turn on a session whose workspace was removed is
// refused with 400 invalid_request and starts nothing.
func TestWorkspaceGone(t *testing.T) {
	h := servertest.Start(t, "")
	ws := t.TempDir()
	r := post(t, h, "/sessions", map[string]string{"workspace_path": ws})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var s struct {
		ID string `json:"id"`
	}
	r.decode(t, &s)
	servertest.Must(t, os.Remove(ws))
	expectErr(t, post(t, h, "/sessions/"+s.ID+"/turns", map[string]string{"content": "/echo hi"}), 400, api.CodeInvalidRequest)
	checkNoTurns(t, h, s.ID)
}

// TestShuttingDown: once the session manager shuts down, new sessions
// and turns are refused with 503 shutting_down; reads still work.
func TestShuttingDown(t *testing.T) {
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	servertest.Must(t, h.Server.Sessions.Shutdown(ctx))
	expectErr(t, post(t, h, "/sessions", map[string]string{"workspace_path": h.Workspace}), 503, api.CodeShuttingDown)
	expectErr(t, post(t, h, "/sessions/"+sid+"/turns", map[string]string{"content": "/echo hi"}), 503, api.CodeShuttingDown)
	if r := get(t, h, "/sessions/"+sid); r.status != http.StatusOK {
		t.Fatalf("get while shutting down: %d %s", r.status, r.body)
	}
	if n := sessionCount(t, h); n != 1 {
		t.Fatalf("%d sessions", n)
	}
}
