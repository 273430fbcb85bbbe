package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/metis-agent/metis/protocol"
)

// chatPrinter prints a session's events as a chat: the user's messages,
// the answer's text as it streams, one line per tool call and outcome,
// approvals, workers and each turn's end. Deltas other than text are
// summed up, never printed raw. It is metis tail's default view. What
// it prints from the stream is made Printable.
type chatPrinter struct {
	w        io.Writer
	session  string          // the session tailed: other sessions' lines (workers) are marked
	midLine  bool            // the last text printed did not end a line
	thinking map[string]bool // messages whose thinking was announced
}

func newChatPrinter(w io.Writer, session string) *chatPrinter {
	return &chatPrinter{w: w, session: session, thinking: map[string]bool{}}
}

// line prints a whole line, ending the streamed text first.
func (p *chatPrinter) line(ev *protocol.EventEnvelope, format string, args ...any) {
	if p.midLine {
		fmt.Fprintln(p.w)
		p.midLine = false
	}
	s := Printable(fmt.Sprintf(format, args...))
	if ev != nil && ev.SessionID != p.session {
		s = "[" + ev.SessionID + "] " + s
	}
	fmt.Fprintln(p.w, s)
}

// text prints streamed text as it comes.
func (p *chatPrinter) text(s string) {
	if s == "" {
		return
	}
	s = Printable(s)
	fmt.Fprint(p.w, s)
	p.midLine = !strings.HasSuffix(s, "\n")
}

// soFar prints what a snapshot held of an answer still streaming.
func (p *chatPrinter) soFar(text string) {
	p.line(nil, "(answer so far)")
	p.text(text)
}

func (p *chatPrinter) event(ev *protocol.EventEnvelope) {
	var x struct {
		MessageID   string          `json:"message_id"`
		Text        string          `json:"text"`
		ToolName    string          `json:"tool_name"`
		Input       json.RawMessage `json:"input"`
		Summary     string          `json:"summary"`
		Result      string          `json:"result"`
		Diff        string          `json:"diff"`
		ErrorClass  string          `json:"error_class"`
		Message     string          `json:"message"`
		Reason      string          `json:"reason"`
		Decision    string          `json:"decision"`
		Targets     []string        `json:"targets"`
		Outcome     string          `json:"outcome"`
		DurationMS  int64           `json:"duration_ms"`
		Task        string          `json:"task"`
		Worker      string          `json:"worker_session_id"`
		FailureMode string          `json:"failure_mode"`
		Mode        string          `json:"mode"`
		Before      int64           `json:"tokens_before"`
		After       int64           `json:"tokens_after"`
		Usage       struct {
			InputTokens  int64   `json:"input_tokens"`
			OutputTokens int64   `json:"output_tokens"`
			CostUSD      float64 `json:"cost_usd"`
		} `json:"usage"`
	}
	if json.Unmarshal(ev.Payload, &x) != nil {
		return
	}
	took := time.Duration(x.DurationMS) * time.Millisecond
	if took >= time.Second {
		took = took.Round(100 * time.Millisecond)
	}
	switch protocol.EventType(ev.Type) {
	case protocol.EventTurnStarted:
		p.line(nil, "")
		p.line(ev, "› %s", strings.ReplaceAll(UserText(ev.Payload), "\n", "\n  "))
	case protocol.EventThinkingDelta:
		if !p.thinking[x.MessageID] {
			p.thinking[x.MessageID] = true
			p.line(ev, "✻ thinking…")
		}
	case protocol.EventTextDelta:
		if ev.SessionID == p.session {
			p.text(x.Text)
		}
	case protocol.EventMessageComplete:
		if p.midLine {
			fmt.Fprintln(p.w)
			p.midLine = false
		}
	case protocol.EventToolCalled:
		p.line(ev, "▸ %s %s", x.ToolName, toolInput(x.ToolName, x.Input))
	case protocol.EventToolCompleted:
		mark := "✓"
		if code, ok := strings.CutPrefix(x.Summary, "exit "); ok && !strings.HasPrefix(code, "0 ") {
			mark = "✗"
		}
		sum := x.Summary
		if sum == "" {
			sum, _, _ = strings.Cut(x.Result, "\n")
		}
		p.line(ev, "  %s %s", mark, sum)
		if x.Diff != "" {
			p.line(nil, "%s", indentLines(firstN(x.Diff, 40), "    "))
		}
	case protocol.EventToolFailed:
		p.line(ev, "  ✗ %s: %s", x.ErrorClass, firstN(x.Message, 3))
	case protocol.EventApprovalRequested:
		p.line(ev, "⏸ %s waits for approval: %s (%s) — answer in the TUI, the dashboard or metis send", x.ToolName,
			strings.Join(x.Targets, ", "), x.Reason)
	case protocol.EventApprovalResolved:
		p.line(ev, "  approval: %s (%s)", x.Decision, x.Reason)
	case protocol.EventLLMCallFailed:
		if x.ErrorClass != "cancelled" {
			p.line(ev, "✗ model error (%s): %s", x.ErrorClass, x.Message)
		}
	case protocol.EventDelegateStarted:
		p.line(ev, "⧉ worker %s: %s", x.Worker, x.Task)
	case protocol.EventDelegateCompleted:
		p.line(ev, "⧉ worker %s done: %s", x.Worker, x.Summary)
	case protocol.EventDelegateFailed:
		p.line(ev, "⧉ worker %s failed: %s", x.Worker, x.FailureMode)
	case protocol.EventContextCompacted:
		p.line(ev, "⟳ conversation compacted: %d → %d tokens", x.Before, x.After)
	case protocol.EventSessionModeChanged:
		p.line(ev, "mode: %s", x.Mode)
	case protocol.EventTurnCompleted:
		if x.Outcome == "failed" {
			p.line(ev, "✗ turn failed (%s) after %s", x.ErrorClass, took)
			return
		}
		p.line(ev, "✓ done in %s · %d in · %d out · $%.4f", took, x.Usage.InputTokens, x.Usage.OutputTokens, x.Usage.CostUSD)
	case protocol.EventTurnCancelled:
		p.line(ev, "■ cancelled (%s) after %s", x.Reason, took)
	}
}

// toolInput is a tool call's input on one line: "$ command" for shell.
func toolInput(tool string, input json.RawMessage) string {
	if tool == "shell" {
		var in struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(input, &in) == nil && in.Command != "" {
			return "$ " + strings.Join(strings.Fields(in.Command), " ")
		}
	}
	s := strings.Join(strings.Fields(string(input)), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:199]) + "…"
	}
	return s
}

// firstN is the first n lines of s, with "…" when there were more.
func firstN(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("… (%d more lines)", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}

func indentLines(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// UserText is the text of a turn.started payload's user message (its
// text blocks, one per line).
func UserText(payload json.RawMessage) string {
	var p struct {
		UserMessage struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"user_message"`
	}
	_ = json.Unmarshal(payload, &p)
	var texts []string
	for _, b := range p.UserMessage.Content {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}
