package acp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/protocol"
)

// A whole builtin:demo turn: thinking, text, a list_dir tool call
// (tool_call, then its authoritative input, in progress, completed with
// the result), usage after each model call, and end_turn. The text the
// editor got is exactly the stored answer: no chunk missing or doubled.
func TestPromptWholeTurn(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	s := serveAgent(t, h.URL)
	init := s.initialize(t)
	if init.ProtocolVersion != 1 || !init.AgentCapabilities.LoadSession ||
		init.AgentCapabilities.SessionCapabilities.List == nil || init.AgentCapabilities.SessionCapabilities.Close == nil ||
		init.AgentCapabilities.SessionCapabilities.Resume == nil {
		t.Fatalf("initialize: %+v", init)
	}
	sid := s.newSession(t, h.Workspace)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	resp, err := s.prompt(ctx, sid, "What is in here?")
	if err != nil {
		t.Fatalf("prompt: %v", err)
	}
	if resp.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("stop reason %q", resp.StopReason)
	}
	if resp.Usage == nil || resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 {
		t.Fatalf("usage %+v", resp.Usage)
	}
	us := s.ed.all()
	if !strings.Contains(thoughtText(us), "I should look at the workspace") {
		t.Errorf("thinking %q", thoughtText(us))
	}
	if got, want := agentText(us), storedText(t, h.URL, sid); got != want || want == "" {
		t.Errorf("streamed text %q\nstored text  %q", got, want)
	}
	calls := toolCalls(us)
	if len(calls) != 1 || calls[0].Kind != sdk.ToolKindSearch || calls[0].Status != sdk.ToolCallStatusPending {
		t.Fatalf("tool calls: %s", describe(us))
	}
	id := string(calls[0].ToolCallId)
	var sawInput, sawProgress, sawDone bool
	for _, u := range us {
		tu := u.ToolCallUpdate
		if tu == nil || string(tu.ToolCallId) != id {
			continue
		}
		if in, ok := tu.RawInput.(map[string]any); ok && in["path"] == "." && tu.Status == nil && !sawProgress {
			// The authoritative input, before the tool runs.
			sawInput = true
			if tu.Title == nil || *tu.Title != "List ." || len(tu.Locations) != 1 || tu.Locations[0].Path != h.Workspace {
				b, _ := json.Marshal(u)
				t.Errorf("input update %s", b)
			}
		}
		if tu.Status != nil && *tu.Status == sdk.ToolCallStatusInProgress {
			sawProgress = true
		}
		if tu.Status != nil && *tu.Status == sdk.ToolCallStatusCompleted {
			sawDone = sawProgress
			if len(tu.Content) != 1 || tu.Content[0].Content == nil || !strings.Contains(tu.Content[0].Content.Content.Text.Text, "README.md") {
				t.Errorf("completed content %+v", tu.Content)
			}
		}
	}
	if !sawInput || !sawProgress || !sawDone {
		t.Errorf("tool call updates (input %v, in progress %v, completed after in progress %v): %s", sawInput, sawProgress, sawDone, describe(us))
	}
	usages := count(us, func(u sdk.SessionUpdate) bool { return u.UsageUpdate != nil })
	if usages != 2 {
		t.Errorf("%d usage updates, want one per model call (2)", usages)
	}
	for _, u := range us {
		if u.UsageUpdate != nil && (u.UsageUpdate.Used == 0 || u.UsageUpdate.Cost == nil || u.UsageUpdate.Cost.Currency != "USD") {
			t.Errorf("usage update %+v", u.UsageUpdate)
		}
	}
}

// session/cancel while a tool runs (spec §6.2.2): the agent cancels the
// metis turn, a WebSocket client on the same session sees the canonical
// sequence (tool.failed cancelled, then turn.cancelled phase tools, one
// cancel only), and the prompt answers cancelled after the tool call's
// failed update.
func TestCancelDuringTool(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	s := serveAgent(t, h.URL)
	s.initialize(t)
	sid := s.newSession(t, h.Workspace)

	// The dashboard-style client.
	wctx, wstop := context.WithCancel(context.Background())
	var mu sync.Mutex
	var seen []*protocol.EventEnvelope
	subscribed := make(chan struct{})
	var once sync.Once
	wc := client.New(h.URL)
	wc.Logger = testLogger()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		_ = wc.Follow(wctx, sid, client.FollowOptions{Filter: "preset:full", OnUpdate: func(u client.Update) {
			switch u.Kind {
			case client.Subscribed:
				once.Do(func() { close(subscribed) })
			case client.EventApplied:
				mu.Lock()
				seen = append(seen, u.Event)
				mu.Unlock()
			}
		}})
	}()
	t.Cleanup(func() { wstop(); <-watchDone })
	<-subscribed

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := s.promptAsync(ctx, sid, `/tool shell {"command": "sleep 30"}`)
	var shellID string
	s.ed.waitFor(t, "the shell call in progress", func(us []sdk.SessionUpdate) bool {
		for _, c := range toolCalls(us) {
			if c.Kind == sdk.ToolKindExecute && toolStatus(us, string(c.ToolCallId)) == sdk.ToolCallStatusInProgress {
				shellID = string(c.ToolCallId)
				return true
			}
		}
		return false
	})
	if err := s.conn.Cancel(ctx, sdk.CancelNotification{SessionId: sdk.SessionId(sid)}); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.r.StopReason != sdk.StopReasonCancelled {
		t.Fatalf("prompt answered %+v, %v", a.r, a.err)
	}
	us := s.ed.all()
	if st := toolStatus(us, shellID); st != sdk.ToolCallStatusFailed {
		t.Errorf("shell call ends %q, want failed; %s", st, describe(us))
	}

	// The other client sees the canonical sequence once it has the end.
	deadline := time.After(testTimeout)
	for {
		mu.Lock()
		ended := false
		for _, ev := range seen {
			ended = ended || ev.Type == "turn.cancelled"
		}
		mu.Unlock()
		if ended {
			break
		}
		select {
		case <-deadline:
			t.Fatal("the WebSocket client never saw turn.cancelled")
		case <-time.After(10 * time.Millisecond):
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var tail []string
	warnings := 0
	for _, ev := range seen {
		switch ev.Type {
		case "tool.called", "tool.completed", "tool.failed", "turn.cancelled", "turn.completed":
			var p struct {
				ErrorClass string `json:"error_class"`
				Phase      string `json:"phase"`
				Reason     string `json:"reason"`
			}
			_ = json.Unmarshal(ev.Payload, &p)
			tail = append(tail, ev.Type+":"+p.ErrorClass+p.Phase)
			if ev.Type == "turn.cancelled" && p.Reason != cancelReason {
				t.Errorf("cancel reason %q", p.Reason)
			}
		case "bus.handler_warning":
			warnings++
		}
	}
	want := []string{"tool.called:", "tool.failed:cancelled", "turn.cancelled:tools"}
	if strings.Join(tail, " ") != strings.Join(want, " ") {
		t.Errorf("the WebSocket client saw %v, want %v", tail, want)
	}
	if warnings != 0 {
		t.Errorf("%d bus.handler_warning events (a redundant cancel?)", warnings)
	}
}

// session/load replays the whole conversation, oldest first: the user's
// prompts, the thinking, the text, each tool call with its final status
// and result.
func TestLoadReplaysConversation(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	sid := h.CreateSession()
	h.Submit(sid, "first question")
	h.WaitTurn(sid)
	h.Submit(sid, "/echo second answer")
	h.WaitTurn(sid)

	s := serveAgent(t, h.URL)
	s.initialize(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := s.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(sid), Cwd: h.Workspace, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	us := s.ed.all()
	var users []string
	for _, u := range us {
		if u.UserMessageChunk != nil {
			users = append(users, u.UserMessageChunk.Content.Text.Text)
		}
	}
	if strings.Join(users, "|") != "first question|/echo second answer" {
		t.Errorf("user messages %q", users)
	}
	if got, want := agentText(us), storedText(t, h.URL, sid); got != want || !strings.HasSuffix(got, "second answer") {
		t.Errorf("replayed text %q, stored %q", got, want)
	}
	if !strings.Contains(thoughtText(us), "I should look at the workspace") {
		t.Errorf("thinking %q", thoughtText(us))
	}
	calls := toolCalls(us)
	if len(calls) != 1 || calls[0].Kind != sdk.ToolKindSearch || toolStatus(us, string(calls[0].ToolCallId)) != sdk.ToolCallStatusCompleted {
		t.Errorf("tool calls: %s", describe(us))
	}
	// Order: the first user message comes first, the second after the
	// tool call.
	if us[0].UserMessageChunk == nil {
		t.Errorf("first update is not the user's message: %s", describe(us))
	}

	// Unknown session: resource not found, and the agent keeps serving.
	_, err := s.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: "sess_nope", Cwd: h.Workspace, McpServers: []sdk.McpServer{}})
	var re *sdk.RequestError
	if !errors.As(err, &re) || re.Code != codeResourceNotFound {
		t.Errorf("load of an unknown session: %v", err)
	}
	list, err := s.conn.ListSessions(ctx, sdk.ListSessionsRequest{Cwd: &h.Workspace})
	if err != nil || len(list.Sessions) != 1 || string(list.Sessions[0].SessionId) != sid {
		t.Errorf("session/list: %+v, %v", list, err)
	}
	if _, err := s.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sdk.SessionId(sid), Cwd: h.Workspace}); err != nil {
		t.Errorf("session/resume: %v", err)
	}
	if _, err := s.conn.CloseSession(ctx, sdk.CloseSessionRequest{SessionId: sdk.SessionId(sid)}); err != nil {
		t.Errorf("session/close: %v", err)
	}
}

// A delegation shows inside the delegate tool call (kind think): its
// content carries the worker's progress and answer, then the result.
func TestDelegationInsideToolCall(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	s := serveAgent(t, h.URL)
	s.initialize(t)
	sid := s.newSession(t, h.Workspace)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	resp, err := s.prompt(ctx, sid, `/tool delegate {"task": "/echo worker says hi"}`)
	if err != nil || resp.StopReason != sdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v, %v", resp, err)
	}
	us := s.ed.all()
	calls := toolCalls(us)
	if len(calls) != 1 || calls[0].Kind != sdk.ToolKindThink {
		t.Fatalf("tool calls: %s", describe(us))
	}
	id := string(calls[0].ToolCallId)
	progressSeen, final := false, ""
	for _, u := range us {
		tu := u.ToolCallUpdate
		if tu == nil || string(tu.ToolCallId) != id || len(tu.Content) == 0 {
			continue
		}
		text := tu.Content[0].Content.Content.Text.Text
		if tu.Status == nil && strings.HasPrefix(text, "Worker sess_") {
			progressSeen = true
		}
		if tu.Status != nil && *tu.Status == sdk.ToolCallStatusCompleted {
			final = text
		}
	}
	if !progressSeen || !strings.Contains(final, "worker says hi") || !strings.HasPrefix(final, "Worker sess_") {
		t.Errorf("progress seen %v, final content %q; %s", progressSeen, final, describe(us))
	}
}

// failingModel is a model whose every call fails with invalid_request.
type failingModel struct{}

func (failingModel) Stream(context.Context, model.Request, func(model.Delta) error) (model.Result, error) {
	return model.Result{}, &model.Error{Class: model.ClassInvalidRequest, Message: "the prompt is malformed"}
}

// A turn whose model call fails is a JSON-RPC error with the class and
// the message; and a prompt while another client's turn runs is refused
// as an invalid request (the server's 409), the agent serving on.
func TestFailedTurnIsError(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "")
	h.Server.Models.Register("failing", failingModel{})
	s := serveAgent(t, h.URL)
	s.initialize(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var created struct {
		ID string `json:"id"`
	}
	if st := h.Do("POST", "/sessions", map[string]string{"workspace_path": h.Workspace, "model": "failing:always"}, &created); st != 201 {
		t.Fatalf("create: %d", st)
	}
	_, err := s.prompt(ctx, created.ID, "hello")
	var re *sdk.RequestError
	if !errors.As(err, &re) || re.Code != codeTurnFailed || !strings.Contains(re.Message, "invalid_request: the prompt is malformed") {
		t.Fatalf("failed turn answered %v", err)
	}
	if data, _ := re.Data.(map[string]any); data["error_class"] != "invalid_request" || data["turn_id"] == "" {
		t.Errorf("error data %v", re.Data)
	}

	sid := s.newSession(t, h.Workspace)
	h.Submit(sid, `/tool shell {"command": "sleep 30"}`)
	_, err = s.prompt(ctx, sid, "hello")
	if !errors.As(err, &re) || re.Code != codeInvalidRequest {
		t.Errorf("prompt during another client's turn: %v", err)
	}
}

// session/load while a turn runs replays the answer as far as it has
// streamed, answers, then goes on sending the answer's later chunks
// live: the editor ends with exactly the stored text, nothing twice,
// and the turn's tool calls and usage as a prompt would show them.
func TestLoadWhileATurnRuns(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "", func(c *config.Config) { c.DemoDelay = 5 * time.Millisecond })
	sid := h.CreateSession()
	h.Submit(sid, "/long 120")
	servertest.WaitFor(t, "the answer to stream", func() bool {
		n := 0
		for _, e := range h.Live.Events(sid) {
			if e.Type == "text.delta" {
				n++
			}
		}
		return n >= 40
	})

	s := serveAgent(t, h.URL)
	s.initialize(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := s.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(sid), Cwd: h.Workspace, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	atLoad := agentText(s.ed.all())
	if !strings.HasPrefix(atLoad, "Sentence 1 of 120. Sentence 2 of 120.") {
		t.Fatalf("session/load answered with the answer so far %.60q…", atLoad)
	}
	h.WaitTurn(sid)
	want := storedText(t, h.URL, sid)
	// The usage update follows the answer's last chunk: wait for both.
	s.ed.waitFor(t, "the rest of the answer and its usage", func(us []sdk.SessionUpdate) bool {
		return len(agentText(us)) >= len(want) && count(us, func(u sdk.SessionUpdate) bool { return u.UsageUpdate != nil }) > 0
	})
	us := s.ed.all()
	if got := agentText(us); got != want {
		t.Fatalf("the editor holds %d bytes (%.40q…), the stored answer is %d bytes", len(got), got, len(want))
	}
	if len(atLoad) >= len(want) {
		t.Fatalf("the turn had ended by the load (%d of %d bytes): the test did not load mid-answer", len(atLoad), len(want))
	}
	if n := count(us, func(u sdk.SessionUpdate) bool { return u.UserMessageChunk != nil }); n != 1 {
		t.Fatalf("%d user message chunks: %s", n, describe(us))
	}
	if n := count(us, func(u sdk.SessionUpdate) bool { return u.UsageUpdate != nil }); n != 1 {
		t.Fatalf("%d usage updates after the model call ended: %s", n, describe(us))
	}
}

// session/load while a turn runs whose answer's start the server no
// longer holds (a small ring): the answer is not sent from its middle;
// it is sent whole once it completes, exactly once.
func TestLoadWhenTheAnswersStartIsGone(t *testing.T) {
	leakCheck(t)
	h := servertest.Start(t, "", func(c *config.Config) { c.DemoDelay = 5 * time.Millisecond; c.StreamRing = 10 })
	sid := h.CreateSession()
	h.Submit(sid, "/long 60")
	servertest.WaitFor(t, "the answer to stream past the ring", func() bool {
		n := 0
		for _, e := range h.Live.Events(sid) {
			if e.Type == "text.delta" {
				n++
			}
		}
		return n >= 30
	})
	s := serveAgent(t, h.URL)
	s.initialize(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := s.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(sid), Cwd: h.Workspace, McpServers: []sdk.McpServer{}}); err != nil {
		t.Fatalf("session/load: %v", err)
	}
	if got := agentText(s.ed.all()); got != "" {
		t.Fatalf("session/load sent the answer from its middle: %.60q…", got)
	}
	h.WaitTurn(sid)
	want := storedText(t, h.URL, sid)
	s.ed.waitFor(t, "the whole answer", func(us []sdk.SessionUpdate) bool { return len(agentText(us)) >= len(want) })
	if got := agentText(s.ed.all()); got != want {
		t.Fatalf("the editor holds %d bytes (%.40q…), the stored answer is %d bytes", len(got), got, len(want))
	}
}
