package acp

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// askingServer is a server whose sessions start in default mode, where
// shell asks (the sandbox off, as elsewhere in these tests).
func askingServer(t *testing.T) *servertest.Harness {
	return servertest.Start(t, "", func(c *config.Config) { c.DefaultMode = permission.ModeDefault })
}

// shellPrompt makes builtin:demo call shell with command.
func shellPrompt(command string) string {
	b, _ := json.Marshal(map[string]string{"command": command})
	return "/tool shell " + string(b)
}

// resolutions are the session's approval.resolved payloads so far.
func resolutions(h *servertest.Harness, sid string) []protocol.ApprovalResolvedPayload {
	var out []protocol.ApprovalResolvedPayload
	for _, ev := range h.Live.Events(sid) {
		if ev.Type == event.Type(protocol.EventApprovalResolved) {
			var p protocol.ApprovalResolvedPayload
			_ = json.Unmarshal(ev.Payload, &p)
			out = append(out, p)
		}
	}
	return out
}

// wantOneResolution checks that the session's one approval request was
// decided so.
func wantOneResolution(t *testing.T, h *servertest.Harness, sid, decision, reason string) {
	t.Helper()
	if res := resolutions(h, sid); len(res) != 1 || res[0].Decision != decision || res[0].Reason != reason {
		t.Fatalf("resolutions %+v, want one %s (%s)", res, decision, reason)
	}
}

// toolFailures are the session's tool.failed payloads so far.
func toolFailures(h *servertest.Harness, sid string) []toolPayload {
	var out []toolPayload
	for _, ev := range h.Live.Events(sid) {
		if ev.Type == event.Type(protocol.EventToolFailed) {
			var p toolPayload
			_ = json.Unmarshal(ev.Payload, &p)
			out = append(out, p)
		}
	}
	return out
}

// openSession serves an agent over h, initializes it and opens a
// session in h's workspace.
func openSession(t *testing.T, h *servertest.Harness) (*session, string) {
	t.Helper()
	s := serveAgent(t, h.URL)
	s.initialize(t)
	return s, s.newSession(t, h.Workspace)
}

func mustPrompt(t *testing.T, s *session, sid, text string) sdk.PromptResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	r, err := s.prompt(ctx, sid, text)
	if err != nil {
		t.Fatalf("prompt %q: %v", text, err)
	}
	return r
}

// Each of ACP's four permission options maps to a metis answer: the
// editor is asked with the request's tool call (title, kind, input) and
// the options; allow_once runs the call and the next one asks again;
// allow_always adds the session rule (the next one does not ask);
// reject_once refuses the call (permission_denied) and the next asks
// again; reject_always refuses it and the agent refuses the next one
// without asking.
func TestPermissionOptions(t *testing.T) {
	leakCheck(t)
	h := askingServer(t)
	for _, tc := range []struct {
		option     sdk.PermissionOptionId
		decision   string
		scope      string
		askedAgain bool
		secondRuns bool
	}{
		{optAllowOnce, protocol.DecisionAllow, protocol.ScopeOnce, true, true},
		{optAllowAlways, protocol.DecisionAllow, protocol.ScopeSession, false, true},
		{optRejectOnce, protocol.DecisionDeny, protocol.ScopeOnce, true, false},
		{optRejectAlways, protocol.DecisionDeny, protocol.ScopeSession, false, false},
	} {
		t.Run(string(tc.option), func(t *testing.T) {
			s, sid := openSession(t, h)
			s.ed.answering(tc.option)

			r := mustPrompt(t, s, sid, shellPrompt("echo first"))
			if r.StopReason != sdk.StopReasonEndTurn {
				t.Fatalf("stop reason %q", r.StopReason)
			}
			qs := s.ed.questions()
			if len(qs) != 1 {
				t.Fatalf("asked %d times", len(qs))
			}
			q := qs[0]
			if q.SessionId != sdk.SessionId(sid) || q.ToolCall.Title == nil || !strings.HasPrefix(*q.ToolCall.Title, "Run echo first") ||
				q.ToolCall.Kind == nil || *q.ToolCall.Kind != sdk.ToolKindExecute {
				b, _ := json.Marshal(q)
				t.Fatalf("request %s", b)
			}
			var kinds []sdk.PermissionOptionKind
			for _, o := range q.Options {
				kinds = append(kinds, o.Kind)
			}
			if want := []sdk.PermissionOptionKind{sdk.PermissionOptionKindAllowOnce, sdk.PermissionOptionKindAllowAlways,
				sdk.PermissionOptionKindRejectOnce, sdk.PermissionOptionKindRejectAlways}; !slices.Equal(kinds, want) {
				t.Fatalf("options %v, want %v", kinds, want)
			}
			res := resolutions(h, sid)
			if len(res) != 1 || res[0].Decision != tc.decision || res[0].Scope != tc.scope || res[0].Reason != protocol.ApprovalReasonUser {
				t.Fatalf("resolutions %+v", res)
			}
			id := string(q.ToolCall.ToolCallId)
			want := sdk.ToolCallStatusCompleted
			if tc.decision == protocol.DecisionDeny {
				want = sdk.ToolCallStatusFailed
			}
			if st := toolStatus(s.ed.all(), id); st != want {
				t.Fatalf("call status %q, want %q", st, want)
			}

			mustPrompt(t, s, sid, shellPrompt("echo second"))
			if asked := len(s.ed.questions()) == 2; asked != tc.askedAgain {
				t.Errorf("second call asked: %v, want %v", asked, tc.askedAgain)
			}
			fails := toolFailures(h, sid)
			if tc.secondRuns && len(fails) != 0 {
				t.Errorf("failures %+v, want none", fails)
			}
			if !tc.secondRuns && (len(fails) != 2 || fails[0].ErrorClass != "permission_denied" || fails[1].ErrorClass != "permission_denied") {
				t.Errorf("failures %+v, want two permission_denied", fails)
			}
			if tc.option == optRejectAlways {
				res := resolutions(h, sid)
				if len(res) != 2 || res[1].Decision != protocol.DecisionDeny || res[1].Message != rejectedReason {
					t.Errorf("second resolution %+v", res)
				}
			}
		})
	}
}

// When the editor cancels the turn while it asks (session/cancel, then
// ACP's cancelled outcome for the open request), the turn is cancelled:
// the request is denied with reason cancelled, nothing runs, and the
// prompt answers cancelled.
func TestPermissionCancelWhileAsking(t *testing.T) {
	leakCheck(t)
	h := askingServer(t)
	s, sid := openSession(t, h)
	asked := make(chan struct{})
	release := make(chan struct{})
	s.ed.perm = func(ctx context.Context, _ sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
		close(asked)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := s.promptAsync(ctx, sid, shellPrompt("echo never"))
	<-asked
	if err := s.conn.Cancel(ctx, sdk.CancelNotification{SessionId: sdk.SessionId(sid)}); err != nil {
		t.Fatal(err)
	}
	close(release) // the editor answers the open request: cancelled
	a := <-done
	if a.err != nil || a.r.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("prompt: %+v %v", a.r, a.err)
	}
	wantOneResolution(t, h, sid, protocol.DecisionDeny, protocol.ApprovalReasonCancelled)
}

// A cancelled outcome alone (the editor cancelled its prompt turn
// without a session/cancel reaching the agent first) cancels the turn
// too: ACP sends that outcome only for a cancelled turn.
func TestPermissionCancelledOutcomeCancelsTheTurn(t *testing.T) {
	leakCheck(t)
	h := askingServer(t)
	s, sid := openSession(t, h)
	s.ed.perm = func(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	r := mustPrompt(t, s, sid, shellPrompt("echo never"))
	if r.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("stop reason %q", r.StopReason)
	}
	if res := resolutions(h, sid); len(res) != 1 || res[0].Reason != protocol.ApprovalReasonCancelled {
		t.Fatalf("resolutions %+v", res)
	}
}

// A request decided elsewhere while the editor asks (here: another
// client switches the session to auto mode, which releases it) is
// withdrawn from the editor with $/cancel_request; the editor is told
// the new mode (current_mode_update, and the config options again), and
// the call runs.
func TestPermissionDecidedElsewhereIsWithdrawn(t *testing.T) {
	leakCheck(t)
	h := askingServer(t)
	s, sid := openSession(t, h)
	withdrawn := make(chan struct{})
	s.ed.perm = func(ctx context.Context, _ sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
		go func() {
			if st := h.Do("PATCH", "/sessions/"+sid, map[string]string{"mode": "auto"}, nil); st != 200 {
				t.Errorf("PATCH mode: %d", st)
			}
		}()
		<-ctx.Done() // the agent's $/cancel_request
		close(withdrawn)
		return sdk.RequestPermissionResponse{}, ctx.Err()
	}
	r := mustPrompt(t, s, sid, shellPrompt("echo released"))
	<-withdrawn
	if r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %q", r.StopReason)
	}
	fence(t, h, s, sid, "fence") // the session's follower sends the mode
	us := s.ed.all()
	if n := countModeUpdates(us, "auto"); n != 1 {
		t.Errorf("%d current_mode_update(auto); updates %s", n, describe(us))
	}
	if n := countModeOptions(us, "auto"); n == 0 {
		t.Errorf("no config_option_update with mode auto")
	}
	res := resolutions(h, sid)
	if len(res) != 1 || res[0].Decision != protocol.DecisionAllow {
		t.Fatalf("resolutions %+v", res)
	}
	if fails := toolFailures(h, sid); len(fails) != 0 {
		t.Fatalf("failures %+v", fails)
	}
}

// An editor that cannot ask (session/request_permission answered with
// an error) gets the call refused at once, not left waiting for the
// approval timeout.
func TestPermissionEditorThatCannotAsk(t *testing.T) {
	leakCheck(t)
	h := askingServer(t)
	s, sid := openSession(t, h)
	r := mustPrompt(t, s, sid, shellPrompt("echo never"))
	if r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %q", r.StopReason)
	}
	wantOneResolution(t, h, sid, protocol.DecisionDeny, protocol.ApprovalReasonUser)
}

// An edit that asks shows the change it would make: edit_file's
// replacement as a diff content of the file.
func TestPermissionShowsTheProposedEdit(t *testing.T) {
	leakCheck(t)
	h := askingServer(t)
	s, sid := openSession(t, h)
	s.ed.answering(optRejectOnce)
	mustPrompt(t, s, sid, `/tool edit_file {"path": "README.md", "old_string": "content", "new_string": "text"}`)
	qs := s.ed.questions()
	if len(qs) != 1 || len(qs[0].ToolCall.Content) != 1 || qs[0].ToolCall.Content[0].Diff == nil {
		t.Fatalf("questions %+v", qs)
	}
	d := qs[0].ToolCall.Content[0].Diff
	if d.Path != h.Workspace+"/README.md" || d.NewText != "text" || d.OldText == nil || *d.OldText != "content" {
		t.Fatalf("diff %+v", d)
	}
}

// A worker's call that asks (a delegate call's worker) is asked in the
// editor too, as a tool call of its own titled "Worker: …", which ends
// as the worker's call ends; the planner's session answers it.
func TestPermissionOfAWorker(t *testing.T) {
	leakCheck(t)
	h := askingServer(t)
	s, sid := openSession(t, h)
	s.ed.answering(optAllowOnce)
	r := mustPrompt(t, s, sid, `/tool delegate {"task": "/tool shell {\"command\": \"echo from the worker\"}"}`)
	if r.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %q", r.StopReason)
	}
	var workerAsks []sdk.RequestPermissionRequest
	for _, q := range s.ed.questions() {
		if q.ToolCall.Title != nil && strings.HasPrefix(*q.ToolCall.Title, "Worker: Run echo from the worker") {
			workerAsks = append(workerAsks, q)
		}
	}
	if len(workerAsks) != 1 {
		t.Fatalf("questions %+v", s.ed.questions())
	}
	id := string(workerAsks[0].ToolCall.ToolCallId)
	us := s.ed.all()
	if count(us, func(u sdk.SessionUpdate) bool { return u.ToolCall != nil && string(u.ToolCall.ToolCallId) == id }) != 1 {
		t.Errorf("the worker's call was not announced once; %s", describe(us))
	}
	if st := toolStatus(us, id); st != sdk.ToolCallStatusCompleted {
		t.Errorf("the worker's call ends %q", st)
	}
}

// session/load of a session whose turn waits for an approval asks the
// editor about it; the answer lets the turn go on.
func TestLoadAsksAWaitingRequest(t *testing.T) {
	leakCheck(t)
	h := askingServer(t)
	sid := h.CreateSession()
	h.Submit(sid, shellPrompt("echo waited"))
	for deadline := time.Now().Add(testTimeout); len(summary(t, h, sid).PendingApprovals) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the request never waited")
		}
	}
	s := serveAgent(t, h.URL)
	s.initialize(t)
	s.ed.answering(optAllowOnce)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := s.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(sid), Cwd: h.Workspace, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	h.WaitTurn(sid)
	if qs := s.ed.questions(); len(qs) != 1 || !strings.HasPrefix(*qs[0].ToolCall.Title, "Run echo waited") {
		t.Fatalf("questions %+v", qs)
	}
	wantOneResolution(t, h, sid, protocol.DecisionAllow, protocol.ApprovalReasonUser)
	if fails := toolFailures(h, sid); len(fails) != 0 {
		t.Fatalf("failures %+v", fails)
	}
}
