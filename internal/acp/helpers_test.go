package acp

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/servertest"
)

// testTimeout bounds every wait of these tests: generous, for a loaded
// machine; a healthy run takes a fraction of it.
const testTimeout = 60 * time.Second

// leakCheck verifies, after every other cleanup of the test (the
// servers' shutdown included), that no goroutine the test started is
// left. Call it first.
func leakCheck(t *testing.T) {
	ign := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, ign)
	})
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// editor is the client (editor) side: it records every session/update.
type editor struct {
	mu      sync.Mutex
	updates []sdk.SessionNotification
	changed chan struct{}
	// perm answers session/request_permission (nil: method not found).
	perm  func(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error)
	asked []sdk.RequestPermissionRequest
}

func newEditor() *editor { return &editor{changed: make(chan struct{}, 1)} }

var _ sdk.Client = (*editor)(nil)

func (e *editor) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	e.mu.Lock()
	e.updates = append(e.updates, n)
	e.mu.Unlock()
	select {
	case e.changed <- struct{}{}:
	default:
	}
	return nil
}

// all returns the updates so far.
func (e *editor) all() []sdk.SessionUpdate {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]sdk.SessionUpdate, len(e.updates))
	for i, n := range e.updates {
		out[i] = n.Update
	}
	return out
}

// waitFor waits until cond holds for the updates so far.
func (e *editor) waitFor(t *testing.T, what string, cond func([]sdk.SessionUpdate) bool) {
	t.Helper()
	deadline := time.After(testTimeout)
	for !cond(e.all()) {
		select {
		case <-e.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; updates: %s", what, describe(e.all()))
		}
	}
}

func (e *editor) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsReadTextFile)
}
func (e *editor) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsWriteTextFile)
}
func (e *editor) RequestPermission(ctx context.Context, r sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	e.mu.Lock()
	e.asked = append(e.asked, r)
	perm := e.perm
	e.mu.Unlock()
	if perm == nil {
		return sdk.RequestPermissionResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodSessionRequestPermission)
	}
	return perm(ctx, r)
}

// questions returns the permission requests so far.
func (e *editor) questions() []sdk.RequestPermissionRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]sdk.RequestPermissionRequest(nil), e.asked...)
}

// answering makes the editor answer every permission request with
// option.
func (e *editor) answering(option sdk.PermissionOptionId) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.perm = func(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(option)}, nil
	}
}

// allowingAfter makes the editor run do at every permission request,
// then answer it allow_once.
func (e *editor) allowingAfter(do func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.perm = func(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
		do()
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(optAllowOnce)}, nil
	}
}
func (e *editor) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound("terminal/create")
}
func (e *editor) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound("terminal/kill")
}
func (e *editor) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound("terminal/output")
}
func (e *editor) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound("terminal/release")
}
func (e *editor) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound("terminal/wait_for_exit")
}

// session is an agent served in-process over pipes, driven by the SDK's
// client side.
type session struct {
	conn   *sdk.ClientSideConnection
	ed     *editor
	stdin  *io.PipeWriter
	served chan struct{}
	http   *http.Transport
}

// serveAgent serves the agent over the metis server at url, on pipes.
// The test's cleanup closes its stdin and waits for it to return.
func serveAgent(t *testing.T, url string) *session {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	tr := &http.Transport{}
	c := client.New(url)
	c.HTTP = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	c.Logger = testLogger()
	s := &session{ed: newEditor(), stdin: inW, served: make(chan struct{}), http: tr}
	go func() {
		defer close(s.served)
		defer outW.Close()
		Serve(context.Background(), c, "", inR, outW, testLogger())
	}()
	s.conn = sdk.NewClientSideConnection(s.ed, inW, outR)
	s.conn.SetLogger(testLogger())
	t.Cleanup(func() { s.close(t) })
	return s
}

// close closes the agent's stdin and waits for Serve to return.
func (s *session) close(t *testing.T) {
	t.Helper()
	_ = s.stdin.Close()
	select {
	case <-s.served:
	case <-time.After(testTimeout):
		t.Fatal("Serve did not return after stdin closed")
	}
	select {
	case <-s.conn.Done():
	case <-time.After(testTimeout):
		t.Fatal("the client side did not see the end of the agent's output")
	}
	s.http.CloseIdleConnections()
}

func (s *session) initialize(t *testing.T) sdk.InitializeResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	r, err := s.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientCapabilities: sdk.ClientCapabilities{}})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return r
}

func (s *session) newSession(t *testing.T, cwd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	r, err := s.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	return string(r.SessionId)
}

func (s *session) prompt(ctx context.Context, sid, text string) (sdk.PromptResponse, error) {
	return s.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sdk.SessionId(sid), Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
}

// runEcho runs Run with args and start as an editor would: it
// initializes, opens a session in the workspace that workspace returns
// (asked after initialize, when Run has found or started its server),
// prompts "/echo text" and checks the answer, then closes stdin. It
// returns Run's exit code and stderr.
func runEcho(t *testing.T, args []string, start func(context.Context, string, []string) (func(), error), workspace func() string, text string) (int, string) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr servertest.SyncBuffer
	code := make(chan int, 1)
	go func() {
		defer outW.Close()
		code <- Run(context.Background(), args, inR, outW, &stderr, Options{StartServer: start})
	}()
	ed := newEditor()
	conn := sdk.NewClientSideConnection(ed, inW, outR)
	conn.SetLogger(discard())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	ns, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: workspace(), McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := conn.Prompt(ctx, sdk.PromptRequest{SessionId: ns.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("/echo " + text)}})
	if err != nil || r.StopReason != sdk.StopReasonEndTurn || agentText(ed.all()) != text {
		t.Fatalf("prompt: %+v, %v, text %q", r, err, agentText(ed.all()))
	}
	inW.Close()
	return <-code, stderr.String()
}

// answer is a prompt's outcome.
type answer struct {
	r   sdk.PromptResponse
	err error
}

// promptAsync sends a prompt on its own goroutine; its answer arrives on
// the channel.
func (s *session) promptAsync(ctx context.Context, sid, text string) <-chan answer {
	done := make(chan answer, 1)
	go func() {
		r, err := s.prompt(ctx, sid, text)
		done <- answer{r, err}
	}()
	return done
}

// Helpers over recorded updates.

func agentText(us []sdk.SessionUpdate) string {
	var b strings.Builder
	for _, u := range us {
		if u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil {
			b.WriteString(u.AgentMessageChunk.Content.Text.Text)
		}
	}
	return b.String()
}

func thoughtText(us []sdk.SessionUpdate) string {
	var b strings.Builder
	for _, u := range us {
		if u.AgentThoughtChunk != nil && u.AgentThoughtChunk.Content.Text != nil {
			b.WriteString(u.AgentThoughtChunk.Content.Text.Text)
		}
	}
	return b.String()
}

func count(us []sdk.SessionUpdate, f func(sdk.SessionUpdate) bool) int {
	n := 0
	for _, u := range us {
		if f(u) {
			n++
		}
	}
	return n
}

// toolStatus is the last status the updates gave a tool call ("" if
// none).
func toolStatus(us []sdk.SessionUpdate, id string) sdk.ToolCallStatus {
	st := sdk.ToolCallStatus("")
	for _, u := range us {
		switch {
		case u.ToolCall != nil && string(u.ToolCall.ToolCallId) == id:
			st = u.ToolCall.Status
		case u.ToolCallUpdate != nil && string(u.ToolCallUpdate.ToolCallId) == id && u.ToolCallUpdate.Status != nil:
			st = *u.ToolCallUpdate.Status
		}
	}
	return st
}

func toolCalls(us []sdk.SessionUpdate) []*sdk.SessionUpdateToolCall {
	var out []*sdk.SessionUpdateToolCall
	for _, u := range us {
		if u.ToolCall != nil {
			out = append(out, u.ToolCall)
		}
	}
	return out
}

// describe summarizes updates for failure messages.
func describe(us []sdk.SessionUpdate) string {
	var parts []string
	for _, u := range us {
		switch {
		case u.AgentMessageChunk != nil:
			parts = append(parts, "text")
		case u.AgentThoughtChunk != nil:
			parts = append(parts, "thought")
		case u.UserMessageChunk != nil:
			parts = append(parts, "user")
		case u.ToolCall != nil:
			parts = append(parts, "tool_call("+string(u.ToolCall.Kind)+","+string(u.ToolCall.Status)+")")
		case u.ToolCallUpdate != nil:
			st := ""
			if u.ToolCallUpdate.Status != nil {
				st = string(*u.ToolCallUpdate.Status)
			}
			parts = append(parts, "tool_call_update("+st+")")
		case u.UsageUpdate != nil:
			parts = append(parts, "usage")
		default:
			parts = append(parts, "other")
		}
	}
	return strings.Join(parts, " ")
}

// storedText is the text of a session's stored assistant messages.
func storedText(t *testing.T, url, sid string) string {
	t.Helper()
	c := client.New(url)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	page, _, err := c.Messages(ctx, sid, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range decodeMessages(page) {
		if m.Role != "assistant" {
			continue
		}
		for _, blk := range m.Content {
			if blk != nil && blk.Type == "text" {
				b.WriteString(blk.Text)
			}
		}
	}
	return b.String()
}

// newTestClient is a client of url whose idle connections the test's
// cleanup closes.
func newTestClient(t testing.TB, url string) *client.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := client.New(url)
	c.HTTP = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	c.Logger = testLogger()
	return c
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
