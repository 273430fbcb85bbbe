package acp

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"
)

// The editor's terminal (docs/editors.md): when the editor offers
// terminals (initialize's clientCapabilities.terminal) and
// --editor-terminal allows it, each shell call the model makes is shown
// live in a terminal of the editor. The command itself runs on the
// server, in its sandbox, after its approval; the editor's terminal runs
// only `metis tool-output`, a read-only mirror of the call's
// tool.output_delta events that exits with the command's exit code. The
// terminal is embedded in the tool call and released once the call has
// ended and the mirror has exited.

// Mirror is how the editor's terminal starts the mirror: this binary
// with the arguments that reach the same server as the agent (and the
// environment, for a token given in $METIS_TOKEN).
type Mirror struct {
	Command string
	Args    []string // --server, --token-file, --home
	Env     []sdk.EnvVariable
}

// Bounds of the terminal requests.
const (
	terminalCreateTimeout = 5 * time.Second
	// terminalExitWait bounds how long, after the call ended, the agent
	// waits for the mirror to exit before it releases the terminal
	// (which kills the mirror).
	terminalExitWait = 10 * time.Second
)

// editorTerminals holds the terminals the agent created.
type editorTerminals struct {
	mirror *Mirror // nil: terminals are not used

	mu      sync.Mutex
	offered bool // the editor offers terminals
	wg      sync.WaitGroup
}

// offerTerminal records whether the editor offers terminals.
func (a *Agent) offerTerminal(offered bool) {
	a.terms.mu.Lock()
	a.terms.offered = offered && a.terms.mirror != nil
	a.terms.mu.Unlock()
}

func (a *Agent) terminalsOn() bool {
	a.terms.mu.Lock()
	defer a.terms.mu.Unlock()
	return a.terms.offered
}

// shellInput is what decides whether a shell call gets a terminal.
type shellInput struct {
	Background bool `json:"background"`
}

// openTerminal creates the editor terminal of a foreground shell call
// that has just started (its tool.called is event calledID) and embeds
// it in the call; "" when there is none.
func (t *turn) openTerminal(ctx context.Context, calledID string, s *toolState, id string) {
	if t.quiet || s.terminal != "" || s.name != "shell" || !t.a.terminalsOn() {
		return
	}
	var in shellInput
	if json.Unmarshal(s.input, &in) != nil || in.Background {
		return // a background command's output is read with shell_output
	}
	m := t.a.terms.mirror
	args := append([]string{"tool-output", t.sid, id, "--since", calledID}, m.Args...)
	cctx, cancel := context.WithTimeout(ctx, terminalCreateTimeout)
	defer cancel()
	limit := 1 << 20
	res, err := t.a.conn.CreateTerminal(cctx, sdk.CreateTerminalRequest{SessionId: sdk.SessionId(t.sid), Command: m.Command,
		Args: args, Env: m.Env, OutputByteLimit: &limit})
	if err != nil {
		t.a.log.Warn("the editor could not create a terminal; the call is shown without one", "tool_use_id", id, "err", err)
		return
	}
	s.terminal = res.TerminalId
	t.send(ctx, sdk.UpdateToolCall(sdk.ToolCallId(id), sdk.WithUpdateContent([]sdk.ToolCallContent{sdk.ToolTerminalRef(s.terminal)})))
}

// releaseTerminal releases a finished call's terminal once its mirror
// has exited (or terminalExitWait passed), in the background.
func (t *turn) releaseTerminal(s *toolState) {
	if s.terminal == "" || s.released {
		return
	}
	s.released = true
	a, sid, tid := t.a, sdk.SessionId(t.sid), s.terminal
	a.terms.wg.Add(1)
	go func() {
		defer a.terms.wg.Done()
		wctx, cancel := context.WithTimeout(a.ctx, terminalExitWait)
		_, err := a.conn.WaitForTerminalExit(wctx, sdk.WaitForTerminalExitRequest{SessionId: sid, TerminalId: tid})
		cancel()
		if err != nil {
			a.log.Debug("the terminal's mirror did not exit in time; releasing it", "terminal", tid, "err", err)
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), terminalCreateTimeout)
		defer cancel()
		if _, err := a.conn.ReleaseTerminal(rctx, sdk.ReleaseTerminalRequest{SessionId: sid, TerminalId: tid}); err != nil {
			a.log.Debug("terminal release", "terminal", tid, "err", err)
		}
	}()
}

// terminalContent is the call's terminal as tool call content, to keep
// it in the updates that replace the content.
func (s *toolState) terminalContent() []sdk.ToolCallContent {
	if s.terminal == "" {
		return nil
	}
	return []sdk.ToolCallContent{sdk.ToolTerminalRef(s.terminal)}
}
