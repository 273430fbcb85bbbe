package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/api"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/session"
	"github.com/metis-agent/metis/internal/workspace"
)

// Endpoints FuzzAPIRequest drives (op % len).
const (
	opCreate = iota
	opSubmit
	opCancel
	opFeedback
	opMessages
	nOps
)

// codesByStatus are the error codes each status may carry.
var codesByStatus = map[int][]string{
	400: {api.CodeInvalidJSON, api.CodeInvalidRequest, api.CodeWorkspaceForbidden, api.CodeWorkspaceHome},
	403: {api.CodeForbiddenHost, api.CodeForbiddenOrigin},
	404: {api.CodeNotFound, api.CodeSessionNotFound, api.CodeTurnNotFound, api.CodeMessageNotFound},
	405: {api.CodeMethodNotAllowed},
	409: {api.CodeTurnInFlight},
	413: {api.CodeBodyTooLarge},
	415: {api.CodeUnsupportedMedia},
}

// fuzzFixture is the state one server holds for the whole fuzz run: a
// session with one completed turn (so feedback, cancel and before= have
// something real to name) and another session with its own message.
type fuzzFixture struct {
	h         *servertest.Harness
	handler   http.Handler
	host      string
	sid       string
	turn      string
	msg       string // a message of sid
	foreign   string // a message of another session
	lastTurn  string // the last turn the fuzzer started
	workspace string
}

func newFuzzFixture(f *testing.F) *fuzzFixture {
	h := servertest.Start(f, "")
	u, err := url.Parse(h.URL)
	if err != nil {
		f.Fatal(err)
	}
	fx := &fuzzFixture{h: h, handler: h.Server.Handler(), host: u.Host, workspace: h.Workspace}
	fx.sid = h.CreateSession()
	fx.turn = h.Submit(fx.sid, "/echo seed")
	h.WaitTurn(fx.sid)
	fx.lastTurn = fx.turn
	other := h.CreateSession()
	h.Submit(other, "/echo elsewhere")
	h.WaitTurn(other)
	first := func(sid string) string {
		var p struct {
			Messages []message.Message `json:"messages"`
		}
		if st := h.Do("GET", "/sessions/"+sid+"/messages", nil, &p); st != http.StatusOK || len(p.Messages) == 0 {
			f.Fatalf("messages of %s: %d %d", sid, st, len(p.Messages))
		}
		return p.Messages[len(p.Messages)-1].ID
	}
	fx.msg, fx.foreign = first(fx.sid), first(other)
	return fx
}

// pick chooses an id: the fixture's (0), the fuzzed one (1), the
// fixture's with the fuzzed one appended (2), or alt (3).
func pick(mode uint8, fixture, fuzzed, alt string) string {
	switch mode & 3 {
	case 0:
		return fixture
	case 1:
		return fuzzed
	case 2:
		return fixture + fuzzed
	}
	return alt
}

// FuzzAPIRequest sends arbitrary bodies, Content-Types, path ids and
// message-page queries to the JSON endpoints of contract §3 through the
// real guarded handler of one server. Properties: no panic, never a 5xx;
// every 4xx carries the contract's JSON error body with a code fitting
// its status; a success carries its documented answer; and a well-formed
// request (judged independently of the handler) is not refused.
//
// A turn the fuzzer starts is waited for before the next input, so the
// fixture session never answers turn_in_flight and each input starts
// from the same state. Contents naming the demo model's /tool command
// are not sent (they would run tools, a shell among them, in the
// workspace), nor its /long, whose length is unbounded.
func FuzzAPIRequest(f *testing.F) {
	fx := newFuzzFixture(f)
	ws, _ := json.Marshal(fx.workspace)
	type seed struct {
		op, ids                   uint8
		id, ct, body, before, lim string
	}
	for _, s := range []seed{
		{opCreate, 0, "", "application/json", `{"workspace_path":` + string(ws) + `}`, "", ""},
		{opCreate, 0, "", "application/json; charset=utf-8", `{"workspace_path":` + string(ws) + `,"model":"builtin:demo"}`, "", ""},
		{opCreate, 0, "", "application/json", `{"workspace_path":"/","model":"nope:x"}`, "", ""},
		{opCreate, 0, "", "application/json", `{"workspace_path":"relative"}`, "", ""},
		{opCreate, 0, "", "text/plain", `{"workspace_path":"/"}`, "", ""},
		{opCreate, 0, "", "application/json", `{"workspace_path":` + string(ws) + `}}`, "", ""},
		{opCreate, 0, "", "application/json", `null`, "", ""},
		{opCreate, 0, "", "", ``, "", ""},
		{opSubmit, 0, "", "application/json", `{"content":"/echo hi"}`, "", ""},
		{opSubmit, 0, "", "application/json", `{"content":"hello there"}`, "", ""},
		{opSubmit, 0, "", "application/json", `{"content":"/model builtin:demo /echo routed"}`, "", ""},
		{opSubmit, 0, "", "application/json", `{"content":"/model builtin:demo"}`, "", ""},
		{opSubmit, 0, "", "application/json", `{"content":"/model nope:x hi"}`, "", ""},
		{opSubmit, 0, "", "application/json", `{"content":" \t\n"}`, "", ""},
		{opSubmit, 0, "", "application/json", `{"content":5}`, "", ""},
		{opSubmit, 0, "", "application/json", `{"content":"a"} {}`, "", ""},
		{opSubmit, 0, "", "application/json", "\r\n{\"content\":\"/echo spaced\"}\t\n", "", ""},
		{opSubmit, 1, "sess_nope", "application/json", `{"content":"/echo hi"}`, "", ""},
		{opSubmit, 1, "..", "application/json", `{"content":"/echo hi"}`, "", ""},
		{opSubmit, 1, "", "application/json", `{"content":"/echo hi"}`, "", ""},
		{opSubmit, 1, "a/b", "application/json", `{"content":"/echo hi"}`, "", ""},
		{opSubmit, 2, "%2F", "application/json", `{"content":"/echo hi"}`, "", ""},
		{opCancel, 0, "", "application/json", ``, "", ""},
		{opCancel, 0, "", "application/json", `{"reason":"user_cancel"}`, "", ""},
		{opCancel, 0, "", "application/json", " \n", "", ""},
		{opCancel, 0, "", "application/json", "{}\r\n", "", ""},
		// Were accepted: decode trimmed with strings.TrimSpace, which also
		// takes \f, \v and U+00A0 for whitespace.
		{opCancel, 0, "", "application/json", "\f", "", ""},
		{opSubmit, 0, "", "application/json", "{\"content\":\"/echo x\"}\v", "", ""},
		{opFeedback, 0, "", "application/json", "{\"rating\":\"up\"}\u00a0", "", ""},
		{opCancel, 0, "", "application/json", `{"reason":` + strconv.Quote(strings.Repeat("r", 201)) + `}`, "", ""},
		{opCancel, 4, "turn_nope", "application/json", `{}`, "", ""},
		{opCancel, 12, "", "application/json", `{}`, "", ""},
		{opCancel, 0, "", "application/x-www-form-urlencoded", `reason=x`, "", ""},
		{opFeedback, 0, "", "application/json", `{"rating":"up","comment":"nice"}`, "", ""},
		{opFeedback, 0, "", "application/json", `{"rating":"down"}`, "", ""},
		{opFeedback, 0, "", "application/json", `{"rating":"meh"}`, "", ""},
		{opFeedback, 8, "", "application/json", `{"rating":"up"}`, "", ""},
		{opMessages, 0, "", "", ``, "", ""},
		{opMessages, 0, "", "", ``, "", "1"},
		{opMessages, 0x20, "", "", ``, "", "500"},
		{opMessages, 0x30, "", "", ``, "", ""},
		{opMessages, 0x10, "", "", ``, "msg_nope", "0"},
		{opMessages, 0, "", "", ``, "", "+7"},
		{opMessages, 0x40, "", "", ``, "", "limit=2&limit=x&before"},
		{opMessages, 1, "x", "", ``, "", "abc"},
		{opMessages | 0x80, 0, "", "application/json", `{}`, "", ""},
		{opCreate | 0x90, 0, "", "application/json", `{}`, "", ""},
		{opSubmit | 0xb0, 0, "", "", ``, "", ""},
	} {
		f.Add(s.op, s.ids, s.id, s.ct, []byte(s.body), s.before, s.lim)
	}
	f.Fuzz(func(t *testing.T, op, ids uint8, id, ct string, body []byte, before, lim string) {
		fx.check(t, op, ids, id, ct, body, before, lim)
	})
}

var fuzzMethods = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "POST"}

func (fx *fuzzFixture) check(t *testing.T, op, ids uint8, id, ct string, body []byte, before, lim string) {
	endpoint := int(op&0x0f) % nOps
	sid := pick(ids, fx.sid, id, "sess_01ARZ3NDEKTSV4RRFFQ69G5FAV")
	turn := pick(ids>>2, fx.turn, id, fx.lastTurn)
	method := "POST"
	var p string
	switch endpoint {
	case opCreate:
		p = "/sessions"
	case opSubmit:
		p = "/sessions/" + url.PathEscape(sid) + "/turns"
	case opCancel:
		p = "/sessions/" + url.PathEscape(sid) + "/turns/" + url.PathEscape(turn) + "/cancel"
	case opFeedback:
		p = "/sessions/" + url.PathEscape(sid) + "/turns/" + url.PathEscape(turn) + "/feedback"
	case opMessages:
		method = "GET"
		p = "/sessions/" + url.PathEscape(sid) + "/messages"
	}
	if op&0x80 != 0 {
		method = fuzzMethods[(op>>4)&7]
	}
	target, err := url.Parse(p)
	if err != nil {
		t.Fatalf("path %q: %v", p, err)
	}
	if endpoint == opMessages {
		if ids&0x40 != 0 {
			target.RawQuery = lim // raw, possibly malformed
		} else {
			q := url.Values{}
			switch b := pick(ids>>4, "", before, fx.foreign); {
			case ids>>4&3 == 2:
				q.Set("before", fx.msg)
			case b != "":
				q.Set("before", b)
			}
			if lim != "" {
				q.Set("limit", lim)
			}
			target.RawQuery = q.Encode()
		}
	}

	// What the server will decode as the turn content; the demo model
	// must not be asked to run tools.
	if endpoint == opSubmit && method == "POST" {
		var c struct {
			Content *string `json:"content"`
		}
		// The first value, as the handler decodes it.
		if json.NewDecoder(bytes.NewReader(body)).Decode(&c) == nil && c.Content != nil &&
			(strings.Contains(*c.Content, "/tool") || strings.Contains(*c.Content, "/long")) {
			t.Skip("content would run a tool or an unbounded /long")
		}
	}

	req := httptest.NewRequest(method, "http://"+fx.host+"/", bytes.NewReader(body))
	req.URL, req.RequestURI, req.Host = target, target.RequestURI(), fx.host
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	rec := httptest.NewRecorder()
	fx.handler.ServeHTTP(rec, req)
	res := rec.Result()
	got := rec.Body.Bytes()

	if res.StatusCode >= 500 || res.StatusCode < 200 {
		t.Fatalf("%s %s (%q): %d %s", method, target, body, res.StatusCode, got)
	}
	if res.StatusCode >= 300 && res.StatusCode < 400 {
		// Only the mux's redirect to the clean path.
		if clean := path.Clean(target.Path); clean == target.Path && !strings.Contains(target.EscapedPath(), "//") {
			t.Fatalf("%s %s: redirect %d from a clean path", method, target, res.StatusCode)
		}
		return
	}
	if res.StatusCode >= 400 {
		checkErrorBody(t, res, got)
	}

	wellFormed, want := fx.oracle(endpoint, method, target, sid, turn, ct, body)
	if wellFormed && res.StatusCode != want {
		t.Fatalf("well-formed %s %s (Content-Type %q, body %q) answered %d %s, want %d", method, target, ct, body, res.StatusCode, got, want)
	}
	if res.StatusCode < 300 {
		// Not JSON is never accepted (an empty body only where the
		// endpoint takes none).
		if method == "POST" && !json.Valid(body) && !(endpoint == opCancel && jsonBlank(body)) {
			t.Fatalf("%s %s accepted a body that is not JSON: %q: %d %s", method, target, body, res.StatusCode, got)
		}
		fx.checkSuccess(t, endpoint, method, sid, res.StatusCode, got)
	}
}

// jsonBlank reports whether b is only JSON whitespace.
func jsonBlank(b []byte) bool { return len(bytes.Trim(b, " \t\r\n")) == 0 }

func checkErrorBody(t *testing.T, res *http.Response, got []byte) {
	t.Helper()
	var e struct {
		Error *struct {
			Code    *string `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(got, &e); err != nil || e.Error == nil || e.Error.Code == nil || e.Error.Message == nil || *e.Error.Message == "" {
		t.Fatalf("%d with error body %q (%v)", res.StatusCode, got, err)
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" {
		t.Fatalf("%d error with Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	codes, ok := codesByStatus[res.StatusCode]
	if !ok || !contains(codes, *e.Error.Code) {
		t.Fatalf("status %d with code %q", res.StatusCode, *e.Error.Code)
	}
}

// checkSuccess checks a 2xx answer and, for a started turn, waits for it
// to end so the next input finds the session idle.
func (fx *fuzzFixture) checkSuccess(t *testing.T, endpoint int, method, sid string, status int, got []byte) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatalf("%d answer %q: %v", status, got, err)
	}
	str := func(k string) string {
		s, _ := m[k].(string)
		return s
	}
	switch {
	case endpoint == opCreate && (method == "GET" || method == "HEAD"):
		if _, ok := m["sessions"].([]any); status != http.StatusOK || !ok {
			t.Fatalf("list answered %d %s", status, got)
		}
	case endpoint == opCreate && method == "POST":
		if status != http.StatusCreated || !strings.HasPrefix(str("id"), "sess_") {
			t.Fatalf("create answered %d %s", status, got)
		}
	case endpoint == opSubmit && method == "POST":
		if status != http.StatusAccepted || !strings.HasPrefix(str("turn_id"), "turn_") {
			t.Fatalf("submit answered %d %s", status, got)
		}
		fx.lastTurn = str("turn_id")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := fx.h.Server.Sessions.Wait(ctx, sid); err != nil {
			t.Fatalf("turn %s did not end: %v", fx.lastTurn, err)
		}
	case endpoint == opCancel && method == "POST":
		switch str("status") {
		case string(session.Cancelling), string(session.AlreadyCancelling), string(session.AlreadyEnded):
		default:
			t.Fatalf("cancel answered %d %s", status, got)
		}
		if status != http.StatusAccepted || str("turn_id") == "" {
			t.Fatalf("cancel answered %d %s", status, got)
		}
	case endpoint == opFeedback && method == "POST":
		if status != http.StatusCreated || !strings.HasPrefix(str("event_id"), "evt_") {
			t.Fatalf("feedback answered %d %s", status, got)
		}
	case endpoint == opMessages && (method == "GET" || method == "HEAD"):
		msgs, ok := m["messages"].([]any)
		if _, isBool := m["has_more"].(bool); status != http.StatusOK || !ok || !isBool {
			t.Fatalf("messages answered %d %s", status, got)
		}
		if len(msgs) > 500 {
			t.Fatalf("a page of %d messages", len(msgs))
		}
	default:
		t.Fatalf("%s on endpoint %d succeeded: %d %s", method, endpoint, status, got)
	}
}

// oracle judges a request without the handler: whether it is well-formed
// and, if so, the status it must get. It is deliberately narrow: only
// requests it can judge simply count as well-formed.
func (fx *fuzzFixture) oracle(endpoint int, method string, target *url.URL, sid, turn, ct string, body []byte) (bool, int) {
	if strings.Contains(target.EscapedPath(), "//") || path.Clean(target.Path) != target.Path {
		return false, 0
	}
	get := method == "GET" || method == "HEAD"
	// The guard comes first: a state-changing method must send JSON.
	if !get && method != "OPTIONS" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return true, http.StatusUnsupportedMediaType
		}
	}
	switch {
	case endpoint == opCreate && get:
		return true, http.StatusOK
	case endpoint == opMessages && get:
	case method != "POST":
		return true, http.StatusMethodNotAllowed
	case endpoint == opMessages:
		return true, http.StatusMethodNotAllowed
	}
	// A strict JSON object: one value, nothing after it.
	obj := func(v any) bool {
		dec := json.NewDecoder(bytes.NewReader(body))
		if dec.Decode(v) != nil {
			return false
		}
		return bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) && jsonBlank(body[dec.InputOffset():])
	}
	switch endpoint {
	case opCreate:
		var r struct {
			WorkspacePath string `json:"workspace_path"`
			Model         string `json:"model"`
			AllowHome     bool   `json:"allow_home"`
		}
		if !obj(&r) || !filepath.IsAbs(r.WorkspacePath) || r.Model != "" && r.Model != "builtin:demo" {
			return false, 0
		}
		st, err := os.Stat(r.WorkspacePath)
		if err != nil || !st.IsDir() {
			return false, 0
		}
		// The root, system directories and the home are refused by the
		// workspace policy (tested in internal/workspace).
		if _, err := workspace.DefaultPolicy().Check(r.WorkspacePath, r.AllowHome); err != nil {
			return true, http.StatusBadRequest
		}
		return true, http.StatusCreated
	case opSubmit:
		var r struct {
			Content *string `json:"content"`
		}
		if sid != fx.sid || !obj(&r) || r.Content == nil {
			return false, 0
		}
		c := strings.TrimLeft(*r.Content, " \t")
		return strings.TrimSpace(c) != "" && !strings.HasPrefix(c, "/model") && len(*r.Content) <= session.MaxTurnContent, http.StatusAccepted
	case opCancel:
		var r struct {
			Reason string `json:"reason"`
		}
		ok := jsonBlank(body) || obj(&r) && len(r.Reason) <= 200
		return ok && sid == fx.sid && (turn == fx.turn || turn == fx.lastTurn), http.StatusAccepted
	case opFeedback:
		var r struct {
			Rating  string `json:"rating"`
			Comment string `json:"comment"`
		}
		ok := obj(&r) && (r.Rating == "up" || r.Rating == "down") && len(r.Comment) <= session.MaxFeedbackComment
		return ok && sid == fx.sid && (turn == fx.turn || turn == fx.lastTurn), http.StatusCreated
	case opMessages:
		q, err := url.ParseQuery(target.RawQuery)
		if err != nil || sid != fx.sid {
			return false, 0
		}
		if b := q.Get("before"); b != "" && b != fx.msg {
			return false, 0
		}
		if l := q.Get("limit"); l != "" {
			n, err := strconv.Atoi(l)
			if err != nil || n < 1 || n > 500 {
				return true, http.StatusBadRequest
			}
		}
		return true, http.StatusOK
	}
	return false, 0
}
