package spectest_test

// Contract §7: modes, approvals on the stream, their answers and their
// ends, as clients of either transport see them (docs/permissions.md).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// careful starts a server as users get it (default mode) on a machine
// whose kernel cannot confine shell commands, whatever this machine's
// can: shell commands ask in every mode.
func careful(opts ...servertest.Option) []servertest.Option {
	return append([]servertest.Option{func(c *config.Config) {
		c.DefaultMode, c.ShellSandbox = permission.ModeDefault, permission.SandboxUnavailable
	}}, opts...)
}

func approvalTimeout(d time.Duration) servertest.Option {
	return func(c *config.Config) { c.ApprovalTimeout = d }
}

// createSession creates a session in a mode ("" for the server's
// default).
func createSession(t *testing.T, h *servertest.Harness, mode string) protocol.SessionSummary {
	t.Helper()
	var s protocol.SessionSummary
	body := map[string]string{"workspace_path": h.Workspace}
	if mode != "" {
		body["mode"] = mode
	}
	if st := h.Do("POST", "/sessions", body, &s); st != http.StatusCreated {
		t.Fatalf("create session in mode %q: status %d", mode, st)
	}
	return s
}

func summaryOf(t *testing.T, h *servertest.Harness, sid string) protocol.SessionSummary {
	t.Helper()
	var a protocol.AttachInfo
	if st := h.Do("GET", "/sessions/"+sid, nil, &a); st != http.StatusOK {
		t.Fatalf("get session: %d", st)
	}
	return a.Session
}

// answer posts an answer and returns the status and the body.
func answer(t *testing.T, h *servertest.Harness, sid, id string, body any) (int, json.RawMessage) {
	t.Helper()
	var raw json.RawMessage
	st := h.Do("POST", "/sessions/"+sid+"/approvals/"+id, body, &raw)
	return st, raw
}

func allow(scope string) protocol.ApprovalAnswer {
	return protocol.ApprovalAnswer{Decision: protocol.DecisionAllow, Scope: scope}
}

func payload[T any](t *testing.T, e *protocol.EventEnvelope) T {
	t.Helper()
	return streamtest.PayloadOf[T](t, e)
}

// nextOfType reads events until one of type typ and returns it.
func nextOfType(t *testing.T, c streamtest.Conn, typ event.Type) *protocol.EventEnvelope {
	t.Helper()
	evs := c.Events(readTimeout, streamtest.UntilType(typ, ""))
	return evs[len(evs)-1]
}

// asking is a turn whose first call waits for approval, with a client
// following the session.
type asking struct {
	h    *servertest.Harness
	sid  string
	turn string
	c    streamtest.Conn
	req  protocol.ApprovalRequestedPayload
}

// startAsking starts a careful server (careful, with opts) with a
// session in the default mode and a client of it on tr, submits
// prompt, and returns once the turn's first approval.requested arrives.
func startAsking(t *testing.T, tr streamtest.Transport, prompt string, opts ...servertest.Option) asking {
	t.Helper()
	a := asking{h: servertest.Start(t, "", careful(opts...)...)}
	a.sid = createSession(t, a.h, "").ID
	a.c, _, _ = attachSub(t, tr, a.h, a.sid, protocol.PresetChat, nil, false)
	a.turn = a.h.Submit(a.sid, prompt)
	a.req = payload[protocol.ApprovalRequestedPayload](t, nextOfType(t, a.c, event.ApprovalRequested))
	return a
}

func shellCmd(command string) string {
	b, _ := json.Marshal(map[string]string{"command": command})
	return "/tool shell " + string(b)
}

func writeCmd(path string) string {
	b, _ := json.Marshal(map[string]string{"path": path, "content": "written by " + path})
	return "/tool write_file " + string(b)
}

// TestApprovalAllowedRunsTheCall: a call that must ask emits
// approval.requested (its pinned fields), the summary lists it, an
// allow answers 200 with the resolution, and approval.resolved comes
// before the call starts.
func TestApprovalAllowedRunsTheCall(t *testing.T) { streamtest.EachTransport(t, testApprovalAllowed) }

func testApprovalAllowed(t *testing.T, tr streamtest.Transport) {
	a := startAsking(t, tr, shellCmd("echo hello"))
	h, sid, c, turn, req := a.h, a.sid, a.c, a.turn, a.req
	if req.ApprovalID == "" || req.ToolUseID == "" || req.ToolName != "shell" || !strings.Contains(string(req.Input), "echo hello") {
		t.Fatalf("approval.requested: %+v", req)
	}
	if req.Kind != "execute" || !slices.Equal(req.Targets, []string{"echo hello"}) || !slices.Equal(req.SessionRules, []string{"shell(echo *)"}) {
		t.Fatalf("approval.requested details: %+v", req)
	}
	pending := summaryOf(t, h, sid).PendingApprovals
	if len(pending) != 1 || pending[0].ApprovalID != req.ApprovalID || pending[0].ToolName != "shell" || pending[0].SessionID != sid {
		t.Fatalf("pending_approvals: %+v", pending)
	}
	st, raw := answer(t, h, sid, req.ApprovalID, allow(protocol.ScopeOnce))
	var res protocol.ApprovalResolution
	if err := json.Unmarshal(raw, &res); st != http.StatusOK || err != nil || res.Decision != "allow" || res.Reason != "user" {
		t.Fatalf("answer: %d %s", st, raw)
	}
	if p := summaryOf(t, h, sid).PendingApprovals; len(p) != 0 {
		t.Fatalf("still pending after the answer's 200: %+v", p)
	}
	evs := until(t, c, event.TurnCompleted, turn)
	types := streamtest.Types(evs)
	i := slices.Index(types, string(event.ApprovalResolved))
	if i < 0 || slices.Index(types, string(event.ToolCalled)) < i || !slices.Contains(types, string(event.ToolCompleted)) {
		t.Fatalf("after the answer: %v", types)
	}
	got := payload[protocol.ApprovalResolvedPayload](t, evs[i])
	if got.ApprovalID != req.ApprovalID || got.ToolUseID != req.ToolUseID || got.Decision != "allow" || got.Reason != "user" {
		t.Fatalf("approval.resolved: %+v", got)
	}
}

// TestApprovalDeniedTellsTheModel: a deny ends the call with tool.failed
// permission_denied, and the model reads that the user refused, with the
// user's reason; the turn goes on.
func TestApprovalDeniedTellsTheModel(t *testing.T) { streamtest.EachTransport(t, testApprovalDenied) }

func testApprovalDenied(t *testing.T, tr streamtest.Transport) {
	a := startAsking(t, tr, writeCmd("notes.txt"))
	h, sid, c, turn, req := a.h, a.sid, a.c, a.turn, a.req
	st, _ := answer(t, h, sid, req.ApprovalID, protocol.ApprovalAnswer{Decision: "deny", Reason: "not in this directory"})
	if st != http.StatusOK {
		t.Fatalf("deny: %d", st)
	}
	evs := until(t, c, event.TurnCompleted, turn)
	var failed *protocol.ToolFailedPayload
	for _, e := range evs {
		if e.Type == string(event.ToolFailed) {
			p := payload[protocol.ToolFailedPayload](t, e)
			failed = &p
		}
		if e.Type == string(event.ToolCalled) {
			t.Fatal("a denied call started")
		}
	}
	if failed == nil || failed.ErrorClass != "permission_denied" || !strings.Contains(failed.Message, "refused") ||
		!strings.Contains(failed.Message, "not in this directory") || failed.Started {
		t.Fatalf("tool.failed: %+v", failed)
	}
	if _, err := readWorkspace(h, "notes.txt"); err == nil {
		t.Fatal("the denied write happened")
	}
	var page struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type    string `json:"type"`
				Content string `json:"content"`
				IsError bool   `json:"is_error"`
			} `json:"content"`
		} `json:"messages"`
	}
	h.Do("GET", "/sessions/"+sid+"/messages", nil, &page)
	told := false
	for _, m := range page.Messages {
		for _, b := range m.Content {
			told = told || b.Type == "tool_result" && b.IsError && strings.Contains(b.Content, "not in this directory")
		}
	}
	if !told {
		t.Fatal("the model was not told the user refused, with the reason")
	}
}

// TestApprovalAnswerErrors: a second answer is 409 approval_resolved
// with the winner in the body; an unknown id, and another session's
// approval, are 404 approval_not_found; a malformed answer is 400.
func TestApprovalAnswerErrors(t *testing.T) {
	a := startAsking(t, streamtest.WebSocket, shellCmd("echo x"))
	h, sid, c, turn, req := a.h, a.sid, a.c, a.turn, a.req
	other := createSession(t, h, "").ID

	for _, body := range []any{map[string]string{"decision": "maybe"}, map[string]string{"decision": "allow", "scope": "forever"},
		map[string]string{}, map[string]any{"decision": 1}, map[string]string{"decision": "deny", "reason": strings.Repeat("x", 3000)}} {
		if st, raw := answer(t, h, sid, req.ApprovalID, body); st != http.StatusBadRequest {
			t.Errorf("%v: %d %s", body, st, raw)
		}
	}
	if st, raw := answer(t, h, sid, "apr_unknown", allow("")); st != http.StatusNotFound || !strings.Contains(string(raw), protocol.CodeApprovalNotFound) {
		t.Errorf("unknown id: %d %s", st, raw)
	}
	if st, raw := answer(t, h, other, req.ApprovalID, allow("")); st != http.StatusNotFound || !strings.Contains(string(raw), protocol.CodeApprovalNotFound) {
		t.Errorf("another session's approval: %d %s", st, raw)
	}
	if st, raw := answer(t, h, "sess_none", req.ApprovalID, allow("")); st != http.StatusNotFound || !strings.Contains(string(raw), protocol.CodeSessionNotFound) {
		t.Errorf("unknown session: %d %s", st, raw)
	}
	if st, _ := answer(t, h, sid, req.ApprovalID, protocol.ApprovalAnswer{Decision: "deny", Reason: "first"}); st != http.StatusOK {
		t.Fatalf("first answer: %d", st)
	}
	until(t, c, event.TurnCompleted, turn)
	st, raw := answer(t, h, sid, req.ApprovalID, allow(""))
	var conflict protocol.ApprovalConflict
	if err := json.Unmarshal(raw, &conflict); st != http.StatusConflict || err != nil || conflict.Error.Code != protocol.CodeApprovalResolved ||
		conflict.Resolution.Decision != "deny" || conflict.Resolution.Message != "first" || conflict.Resolution.ApprovalID != req.ApprovalID {
		t.Fatalf("second answer after the turn: %d %s", st, raw)
	}
}

func readWorkspace(h *servertest.Harness, name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(h.Workspace, name))
}

// TestApprovalTimeout: nobody answers: the request is denied with
// reason timeout, the call fails permission_denied, and an answer after
// it gets 409 with the timeout.
func TestApprovalTimeout(t *testing.T) { streamtest.EachTransport(t, testApprovalTimeout) }

func testApprovalTimeout(t *testing.T, tr streamtest.Transport) {
	a := startAsking(t, tr, shellCmd("echo late"), approvalTimeout(time.Second))
	h, sid, c, turn, req := a.h, a.sid, a.c, a.turn, a.req
	res := payload[protocol.ApprovalResolvedPayload](t, nextOfType(t, c, event.ApprovalResolved))
	if res.Decision != "deny" || res.Reason != "timeout" || res.ApprovalID != req.ApprovalID {
		t.Fatalf("approval.resolved: %+v", res)
	}
	failed := payload[protocol.ToolFailedPayload](t, nextOfType(t, c, event.ToolFailed))
	if failed.ErrorClass != "permission_denied" || !strings.Contains(failed.Message, "nobody answered") {
		t.Fatalf("tool.failed: %+v", failed)
	}
	until(t, c, event.TurnCompleted, turn)
	st, raw := answer(t, h, sid, req.ApprovalID, allow(""))
	var conflict protocol.ApprovalConflict
	if err := json.Unmarshal(raw, &conflict); st != http.StatusConflict || err != nil || conflict.Resolution.Reason != "timeout" {
		t.Fatalf("an answer after the timeout: %d %s", st, raw)
	}
}

// TestCancelDeniesWaitingApprovals: cancelling a turn whose calls wait
// denies every request (reason cancelled), then the cancellation
// sequence runs: tool.failed (cancelled, not started) for each call,
// turn.cancelled with phase approval. A late answer is 409.
func TestCancelDeniesWaitingApprovals(t *testing.T) { streamtest.EachTransport(t, testCancelDenies) }

func testCancelDenies(t *testing.T, tr streamtest.Transport) {
	a := startAsking(t, tr, shellCmd("echo a")+"\n"+writeCmd("b.txt"))
	h, sid, c, turn, first := a.h, a.sid, a.c, a.turn, a.req
	nextOfType(t, c, event.ApprovalRequested)
	var cr struct{ Status string }
	if st := h.Do("POST", "/sessions/"+sid+"/turns/"+turn+"/cancel", map[string]string{}, &cr); st != http.StatusAccepted || cr.Status != "cancelling" {
		t.Fatalf("cancel: %d %+v", st, cr)
	}
	evs := until(t, c, event.TurnCancelled, turn)
	var types []string
	for _, e := range evs {
		switch e.Type {
		case string(event.ApprovalResolved):
			p := payload[protocol.ApprovalResolvedPayload](t, e)
			if p.Decision != "deny" || p.Reason != "cancelled" {
				t.Fatalf("approval.resolved: %+v", p)
			}
		case string(event.ToolFailed):
			p := payload[protocol.ToolFailedPayload](t, e)
			if p.ErrorClass != "cancelled" || p.Started {
				t.Fatalf("tool.failed: %+v", p)
			}
		case string(event.TurnCancelled):
			p := payload[protocol.TurnCancelledPayload](t, e)
			if p.Phase != protocol.CancelPhaseApproval || len(p.CancelledToolUseIDs) != 2 {
				t.Fatalf("turn.cancelled: %+v", p)
			}
		case string(event.ToolCalled):
			t.Fatal("a call started")
		}
		types = append(types, e.Type)
	}
	want := []string{"approval.resolved", "approval.resolved", "tool.failed", "tool.failed", "turn.cancelled"}
	if !slices.Equal(types, want) {
		t.Fatalf("cancellation sequence %v, want %v", types, want)
	}
	if st, _ := answer(t, h, sid, first.ApprovalID, allow("")); st != http.StatusConflict {
		t.Fatalf("an answer after the cancel: %d", st)
	}
}

// TestSeveralCallsAskIndependently: the calls of one message each ask,
// all at once, and each runs or fails on its own answer, in any order.
func TestSeveralCallsAskIndependently(t *testing.T) {
	a := startAsking(t, streamtest.WebSocket, writeCmd("one.txt")+"\n"+writeCmd("two.txt")+"\n"+writeCmd("three.txt"))
	h, sid, c, turn := a.h, a.sid, a.c, a.turn
	reqs := []protocol.ApprovalRequestedPayload{a.req}
	for range 2 {
		reqs = append(reqs, payload[protocol.ApprovalRequestedPayload](t, nextOfType(t, c, event.ApprovalRequested)))
	}
	if p := summaryOf(t, h, sid).PendingApprovals; len(p) != 3 {
		t.Fatalf("%d pending, want 3", len(p))
	}
	// The last first, then the first; the middle one is denied.
	for i, d := range map[int]string{2: "allow", 0: "allow", 1: "deny"} {
		if st, raw := answer(t, h, sid, reqs[i].ApprovalID, protocol.ApprovalAnswer{Decision: d}); st != http.StatusOK {
			t.Fatalf("answer %d: %d %s", i, st, raw)
		}
	}
	until(t, c, event.TurnCompleted, turn)
	for _, tc := range []struct {
		name  string
		wrote bool
	}{{"one.txt", true}, {"two.txt", false}, {"three.txt", true}} {
		if _, err := readWorkspace(h, tc.name); (err == nil) != tc.wrote {
			t.Errorf("%s written: %v, want %v", tc.name, err == nil, tc.wrote)
		}
	}
}

// TestSessionScopeAddsARule: an allow with scope session adds the
// request's session rules to the session (summary, persisted across a
// restart), releases the other requests they cover, and later calls
// they cover do not ask.
func TestSessionScopeAddsARule(t *testing.T) {
	home := t.TempDir()
	h := servertest.Start(t, home, careful()...)
	sid := createSession(t, h, "").ID
	c, _, _ := attachSub(t, streamtest.WebSocket, h, sid, protocol.PresetChat, nil, false)
	turn := h.Submit(sid, shellCmd("echo one")+"\n"+shellCmd("echo two"))
	first := payload[protocol.ApprovalRequestedPayload](t, nextOfType(t, c, event.ApprovalRequested))
	second := payload[protocol.ApprovalRequestedPayload](t, nextOfType(t, c, event.ApprovalRequested))
	if st, raw := answer(t, h, sid, first.ApprovalID, allow(protocol.ScopeSession)); st != http.StatusOK {
		t.Fatalf("answer: %d %s", st, raw)
	}
	evs := until(t, c, event.TurnCompleted, turn)
	var released bool
	for _, e := range evs {
		if e.Type == string(event.ApprovalResolved) {
			p := payload[protocol.ApprovalResolvedPayload](t, e)
			released = released || p.ApprovalID == second.ApprovalID && p.Decision == "allow" && p.ReleasedBy == first.ApprovalID
		}
	}
	if !released || streamtest.CountType(evs, event.ToolCompleted) != 2 {
		t.Fatalf("the second request was not released by the first's rule: %v", streamtest.Types(evs))
	}
	if r := summaryOf(t, h, sid).SessionRules; !slices.Equal(r, []string{"shell(echo *)"}) {
		t.Fatalf("session_rules %q", r)
	}
	turn = h.Submit(sid, shellCmd("echo three"))
	if n := streamtest.CountType(until(t, c, event.TurnCompleted, turn), event.ApprovalRequested); n != 0 {
		t.Fatalf("a call the session rule covers asked (%d)", n)
	}
	h.Stop()
	h2 := servertest.Start(t, home, careful()...)
	if r := summaryOf(t, h2, sid).SessionRules; !slices.Equal(r, []string{"shell(echo *)"}) {
		t.Fatalf("session_rules after a restart: %q", r)
	}
}

// TestModes: a session's mode at creation (the server's default, or the
// one asked for), PATCH to change it (session.mode_changed; 400
// invalid_mode, 404), and what each mode does with an edit.
func TestModes(t *testing.T) {
	h := servertest.Start(t, "", careful(func(c *config.Config) { c.DefaultMode = permission.ModeAcceptEdits })...)
	if m := createSession(t, h, "").Mode; m != "accept_edits" {
		t.Fatalf("a session created without a mode: %q, want the server's default", m)
	}
	s := createSession(t, h, "plan")
	if s.Mode != "plan" {
		t.Fatalf("mode %q", s.Mode)
	}
	var e protocol.HTTPError
	if st := h.Do("POST", "/sessions", map[string]string{"workspace_path": h.Workspace, "mode": "yolo"}, &e); st != http.StatusBadRequest || e.Error.Code != protocol.CodeInvalidMode {
		t.Fatalf("create with a bad mode: %d %+v", st, e)
	}
	c, _, _ := attachSub(t, streamtest.WebSocket, h, s.ID, protocol.PresetChat, nil, false)

	// plan: the edit is refused without asking, and not offered.
	turn := h.Submit(s.ID, writeCmd("planned.txt"))
	evs := until(t, c, event.TurnCompleted, turn)
	if streamtest.CountType(evs, event.ApprovalRequested) != 0 {
		t.Fatal("plan mode asked")
	}
	for _, ev := range evs {
		switch ev.Type {
		case string(event.ToolFailed):
			if p := payload[protocol.ToolFailedPayload](t, ev); p.ErrorClass != "permission_denied" || !strings.Contains(p.Message, "plan mode") {
				t.Fatalf("plan mode refusal: %+v", p)
			}
		case string(event.LLMCallStarted):
			var p struct {
				Request struct{ Tools []string } `json:"request"`
			}
			if err := json.Unmarshal(ev.Payload, &p); err != nil || slices.Contains(p.Request.Tools, "write_file") ||
				slices.Contains(p.Request.Tools, "shell") || !slices.Contains(p.Request.Tools, "read_file") {
				t.Fatalf("tools offered in plan mode: %v (%v)", p.Request.Tools, err)
			}
		}
	}

	var sum protocol.SessionSummary
	if st := h.Do("PATCH", "/sessions/"+s.ID, map[string]string{"mode": "accept_edits"}, &sum); st != http.StatusOK || sum.Mode != "accept_edits" {
		t.Fatalf("PATCH: %d %+v", st, sum)
	}
	changed := payload[protocol.SessionModeChangedPayload](t, nextOfType(t, c, event.SessionModeChanged))
	if changed.Mode != "accept_edits" || changed.PreviousMode != "plan" {
		t.Fatalf("session.mode_changed: %+v", changed)
	}
	for _, tc := range []struct {
		body any
		want int
		code string
	}{{map[string]string{"mode": "yolo"}, 400, protocol.CodeInvalidMode}, {map[string]string{}, 400, protocol.CodeInvalidRequest},
		{map[string]int{"mode": 1}, 400, protocol.CodeInvalidJSON}} {
		var e protocol.HTTPError
		if st := h.Do("PATCH", "/sessions/"+s.ID, tc.body, &e); st != tc.want || e.Error.Code != tc.code {
			t.Errorf("PATCH %v: %d %+v", tc.body, st, e)
		}
	}
	if st := h.Do("PATCH", "/sessions/sess_none", map[string]string{"mode": "plan"}, &e); st != http.StatusNotFound {
		t.Errorf("PATCH of an unknown session: %d", st)
	}

	// accept_edits: the edit runs without asking.
	turn = h.Submit(s.ID, writeCmd("edited.txt"))
	evs = until(t, c, event.TurnCompleted, turn)
	if streamtest.CountType(evs, event.ApprovalRequested) != 0 || streamtest.CountType(evs, event.ToolCompleted) != 1 {
		t.Fatalf("accept_edits: %v", streamtest.Types(evs))
	}
}

// TestModeChangeJudgesWaitingRequests: switching to a mode that runs a
// waiting call allows it; to plan, refuses it.
func TestModeChangeJudgesWaitingRequests(t *testing.T) {
	a := startAsking(t, streamtest.WebSocket, writeCmd("a.txt"))
	h, sid, c, turn := a.h, a.sid, a.c, a.turn
	h.Do("PATCH", "/sessions/"+sid, map[string]string{"mode": "accept_edits"}, nil)
	res := payload[protocol.ApprovalResolvedPayload](t, nextOfType(t, c, event.ApprovalResolved))
	if res.Decision != "allow" || res.Reason != "user" {
		t.Fatalf("switch to accept_edits: %+v", res)
	}
	until(t, c, event.TurnCompleted, turn)
	h.Do("PATCH", "/sessions/"+sid, map[string]string{"mode": "default"}, nil)
	turn = h.Submit(sid, writeCmd("b.txt"))
	nextOfType(t, c, event.ApprovalRequested)
	h.Do("PATCH", "/sessions/"+sid, map[string]string{"mode": "plan"}, nil)
	res = payload[protocol.ApprovalResolvedPayload](t, nextOfType(t, c, event.ApprovalResolved))
	if res.Decision != "deny" || !strings.Contains(res.Message, "plan") {
		t.Fatalf("switch to plan: %+v", res)
	}
	until(t, c, event.TurnCompleted, turn)
}

// TestWorkerApprovalReachesPlannerClients: a worker's request reaches a
// client of its planner that did not ask for workers (live, in the
// planner's summary and snapshot, and in a replay), and answering at
// the planner's URL resolves it. Its mode is the planner's.
func TestWorkerApprovalReachesPlannerClients(t *testing.T) {
	streamtest.EachTransport(t, testWorkerApproval)
}

func testWorkerApproval(t *testing.T, tr streamtest.Transport) {
	h := servertest.Start(t, "", careful()...)
	sid := createSession(t, h, "").ID
	c, ack, _ := attachSub(t, tr, h, sid, protocol.PresetChat, nil, false)
	turn := h.Submit(sid, streamtest.DelegateCmd(shellCmd("echo from the worker")))
	reqEv := nextOfType(t, c, event.ApprovalRequested)
	worker := reqEv.SessionID
	if worker == sid {
		t.Fatal("the planner asked, not its worker")
	}
	req := payload[protocol.ApprovalRequestedPayload](t, reqEv)
	if p := summaryOf(t, h, sid).PendingApprovals; len(p) != 1 || p[0].SessionID != worker || p[0].ApprovalID != req.ApprovalID {
		t.Fatalf("the planner's pending_approvals: %+v", p)
	}
	if m := summaryOf(t, h, worker).Mode; m != "default" {
		t.Fatalf("the worker's mode %q", m)
	}
	// A client attaching now finds it in its snapshot.
	_, _, snap := attachSub(t, tr, h, sid, protocol.PresetChat, nil, true)
	var sum protocol.SessionSummary
	if err := json.Unmarshal(snap.Session, &sum); err != nil || len(sum.PendingApprovals) != 1 || sum.PendingApprovals[0].ApprovalID != req.ApprovalID {
		t.Fatalf("snapshot pending_approvals: %+v (%v)", sum.PendingApprovals, err)
	}
	if st, raw := answer(t, h, sid, req.ApprovalID, allow("")); st != http.StatusOK {
		t.Fatalf("answer at the planner's URL: %d %s", st, raw)
	}
	evs := until(t, c, event.TurnCompleted, turn)
	var resolved *protocol.EventEnvelope
	for _, e := range evs {
		if e.Type == string(event.ApprovalResolved) {
			resolved = e
		}
		if e.SessionID != sid && e.Type != string(event.ApprovalResolved) {
			t.Fatalf("a worker event other than its approvals reached the planner's client: %s", e.Type)
		}
	}
	if resolved == nil || resolved.SessionID != worker {
		t.Fatal("the planner's client did not see the worker's approval.resolved")
	}
	// A replay from the start carries both, in order.
	since := ack.SeamEventID
	r, rack, _ := attachSub(t, tr, h, sid, protocol.PresetChat, &since, false)
	replayed := streamtest.ReadEvents(t, r, readTimeout, rack.ReplayEventCount)
	var got []string
	for _, e := range replayed {
		if e.SessionID == worker {
			got = append(got, e.Type)
		}
	}
	if !slices.Equal(got, []string{"approval.requested", "approval.resolved"}) {
		t.Fatalf("worker events in the replay: %v", got)
	}
	streamtest.CheckIncreasing(t, "replay", replayed, since)
}

// TestApprovalFloodIsBounded: a message with more asking calls than
// MaxPendingApprovals opens that many requests; the rest ask as earlier
// ones are answered.
func TestApprovalFloodIsBounded(t *testing.T) {
	h := servertest.Start(t, "", careful()...)
	sid := createSession(t, h, "").ID
	c, _, _ := attachSub(t, streamtest.WebSocket, h, sid, protocol.PresetChat, nil, false)
	const n = 20
	var lines []string
	for i := range n {
		lines = append(lines, writeCmd(fmt.Sprintf("f%d.txt", i)))
	}
	turn := h.Submit(sid, strings.Join(lines, "\n"))
	var reqs []protocol.ApprovalRequestedPayload
	for range 16 {
		reqs = append(reqs, payload[protocol.ApprovalRequestedPayload](t, nextOfType(t, c, event.ApprovalRequested)))
	}
	servertest.WaitFor(t, "the requests to be listed", func() bool { return len(summaryOf(t, h, sid).PendingApprovals) == 16 })
	time.Sleep(100 * time.Millisecond) // no 17th comes unanswered
	if p := summaryOf(t, h, sid).PendingApprovals; len(p) != 16 {
		t.Fatalf("%d pending, want the bound, 16", len(p))
	}
	if st, _ := answer(t, h, sid, reqs[0].ApprovalID, protocol.ApprovalAnswer{Decision: "deny"}); st != http.StatusOK {
		t.Fatal("answer")
	}
	next := payload[protocol.ApprovalRequestedPayload](t, nextOfType(t, c, event.ApprovalRequested))
	if slices.ContainsFunc(reqs, func(r protocol.ApprovalRequestedPayload) bool { return r.ToolUseID == next.ToolUseID }) {
		t.Fatalf("the 17th request is for a call that had asked: %+v", next)
	}
	// The switch to accept_edits allows the open requests, and the calls
	// still queued run without asking.
	if h.Do("PATCH", "/sessions/"+sid, map[string]string{"mode": "accept_edits"}, nil) != http.StatusOK {
		t.Fatal("patch")
	}
	evs := until(t, c, event.TurnCompleted, turn)
	if got := streamtest.CountType(evs, event.ToolCompleted); got != n-1 {
		t.Fatalf("%d calls completed, want %d", got, n-1)
	}
}

// TestShellAsksWithoutASandbox: with the sandbox's state unknown, a
// shell command asks even in auto mode; an allow rule (or a session
// rule) still allows it.
func TestShellAsksWithoutASandbox(t *testing.T) {
	h := servertest.Start(t, "", careful(func(c *config.Config) {
		rs, err := permission.ParseRules([]string{"shell(echo ok*)"}, nil, []string{"shell(rm *)"})
		if err != nil {
			t.Fatal(err)
		}
		c.Permissions = rs
	})...)
	sid := createSession(t, h, "auto").ID
	c, _, _ := attachSub(t, streamtest.WebSocket, h, sid, protocol.PresetChat, nil, false)
	turn := h.Submit(sid, shellCmd("echo ok"))
	if evs := until(t, c, event.TurnCompleted, turn); streamtest.CountType(evs, event.ApprovalRequested) != 0 {
		t.Fatal("a command an allow rule covers asked")
	}
	turn = h.Submit(sid, shellCmd("echo other"))
	req := payload[protocol.ApprovalRequestedPayload](t, nextOfType(t, c, event.ApprovalRequested))
	if !strings.Contains(req.Reason, "sandbox") {
		t.Fatalf("reason %q", req.Reason)
	}
	answer(t, h, sid, req.ApprovalID, protocol.ApprovalAnswer{Decision: "deny"})
	until(t, c, event.TurnCompleted, turn)
	turn = h.Submit(sid, shellCmd("echo ok && rm -rf x"))
	evs := until(t, c, event.TurnCompleted, turn)
	if streamtest.CountType(evs, event.ApprovalRequested) != 0 || streamtest.CountType(evs, event.ToolCalled) != 0 {
		t.Fatalf("a denied command: %v", streamtest.Types(evs))
	}
}

// TestTwoClientsAnswerAtOnce: two clients, one on each transport, both
// answer every request at the same moment, 1,000 times: exactly one
// answer wins (200), the other gets 409 with the winner's resolution,
// and both clients see the same approval.resolved, the winner's.
func TestTwoClientsAnswerAtOnce(t *testing.T) {
	total := 1000
	if testing.Short() {
		total = 100
	}
	h := servertest.Start(t, "", careful()...)
	sid := createSession(t, h, "").ID
	ws, _, _ := attachSub(t, streamtest.WebSocket, h, sid, protocol.PresetChat, nil, false)
	sse, _, _ := attachSub(t, streamtest.SSE, h, sid, protocol.PresetChat, nil, false)
	type result struct {
		status int
		res    protocol.ApprovalResolution
		who    string
	}
	winners := map[string]protocol.ApprovalResolution{} // approval id → the 200's resolution
	done := 0
	for round := 0; done < total; round++ {
		n := min(16, total-done)
		var lines []string
		for i := range n {
			lines = append(lines, writeCmd(fmt.Sprintf("r%d-%d.txt", round, i)))
		}
		turn := h.Submit(sid, strings.Join(lines, "\n"))
		for range n {
			req := payload[protocol.ApprovalRequestedPayload](t, nextOfType(t, ws, event.ApprovalRequested))
			results := make(chan result, 2)
			for _, who := range []string{"ws-client", "sse-client"} {
				decision := protocol.DecisionAllow
				if who == "sse-client" {
					decision = protocol.DecisionDeny
				}
				go func() {
					st, raw := answer(t, h, sid, req.ApprovalID, protocol.ApprovalAnswer{Decision: decision, Reason: who})
					var r result
					r.status, r.who = st, who
					if st == http.StatusConflict {
						var c protocol.ApprovalConflict
						_ = json.Unmarshal(raw, &c)
						r.res = c.Resolution
					} else {
						_ = json.Unmarshal(raw, &r.res)
					}
					results <- r
				}()
			}
			a, b := <-results, <-results
			if a.status == http.StatusConflict {
				a, b = b, a
			}
			if a.status != http.StatusOK || b.status != http.StatusConflict {
				t.Fatalf("approval %s: statuses %d and %d, want one 200 and one 409", req.ApprovalID, a.status, b.status)
			}
			if a.res.Message != a.who || b.res.Decision != a.res.Decision || b.res.Message != a.res.Message || b.res.ApprovalID != req.ApprovalID {
				t.Fatalf("approval %s: the winner %+v, the loser was told %+v", req.ApprovalID, a.res, b.res)
			}
			winners[req.ApprovalID] = a.res
			done++
		}
		for _, c := range []streamtest.Conn{ws, sse} {
			for _, e := range until(t, c, event.TurnCompleted, turn) {
				if e.Type != string(event.ApprovalResolved) {
					continue
				}
				p := payload[protocol.ApprovalResolvedPayload](t, e)
				w, ok := winners[p.ApprovalID]
				if !ok || p.Decision != w.Decision || p.Message != w.Message || p.Reason != protocol.ApprovalReasonUser {
					t.Fatalf("%s saw %+v, the winner was %+v", c.Transport(), p, w)
				}
			}
		}
	}
	if len(winners) != total {
		t.Fatalf("%d approvals decided, want %d", len(winners), total)
	}
}

// TestWaitingApprovalBlocksNothing: while a call waits for an answer,
// other sessions run their turns, new clients attach, and the waiting
// session's clients keep getting heartbeats.
func TestWaitingApprovalBlocksNothing(t *testing.T) {
	a := startAsking(t, streamtest.WebSocket, shellCmd("echo wait"), heartbeat(200*time.Millisecond, 50))
	h, waiting, c := a.h, a.sid, a.c
	other := createSession(t, h, "").ID

	oc, _, _ := attachSub(t, streamtest.SSE, h, other, protocol.PresetChat, nil, false)
	turn := h.Submit(other, "what is here?")
	until(t, oc, event.TurnCompleted, turn)
	_, _, snap := attachSub(t, streamtest.WebSocket, h, waiting, protocol.PresetChat, nil, true)
	if snap == nil {
		t.Fatal("no snapshot for a client attaching while a call waits")
	}
	for {
		f := readFrame(t, c)
		if f.Type == protocol.TypePing {
			break
		}
	}
}

// TestWorkersFollowTheirPlannersMode: a worker starts in its planner's
// mode, and follows a change of the planner's while it runs: switching
// the planner to plan refuses the worker's waiting command.
func TestWorkersFollowTheirPlannersMode(t *testing.T) {
	h := servertest.Start(t, "", careful()...)
	sid := createSession(t, h, "").ID
	c, _, _ := attachSub(t, streamtest.WebSocket, h, sid, protocol.PresetChat, nil, false)
	all, _, _ := attachSub(t, streamtest.WebSocket, h, sid, streamtest.PresetFilter(event.PresetChat)(true), nil, false)
	turn := h.Submit(sid, streamtest.DelegateCmd(shellCmd("echo in the worker")))
	worker := nextOfType(t, c, event.ApprovalRequested).SessionID
	if st := h.Do("PATCH", "/sessions/"+sid, map[string]string{"mode": "plan"}, nil); st != http.StatusOK {
		t.Fatalf("PATCH: %d", st)
	}
	res := payload[protocol.ApprovalResolvedPayload](t, nextOfType(t, c, event.ApprovalResolved))
	if res.Decision != "deny" || !strings.Contains(res.Message, "plan") {
		t.Fatalf("the worker's request after the planner switched to plan: %+v", res)
	}
	until(t, c, event.TurnCompleted, turn)
	var followed bool
	for _, e := range all.Events(readTimeout, streamtest.UntilType(event.TurnCompleted, turn)) {
		if e.Type == string(event.SessionModeChanged) && e.SessionID == worker {
			p := payload[protocol.SessionModeChangedPayload](t, e)
			followed = p.Mode == "plan" && p.Planner == sid
		}
	}
	if !followed || summaryOf(t, h, worker).Mode != "plan" {
		t.Fatal("the worker did not follow its planner's mode")
	}
}
