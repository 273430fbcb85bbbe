package acp

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/protocol"
)

// toolState is what the editor was told of one tool call.
type toolState struct {
	name   string
	input  json.RawMessage // the input the editor was last sent (nil: none yet)
	status sdk.ToolCallStatus
	// worker: a worker's call, shown because it asked for permission.
	worker bool
	// terminal is the editor terminal that mirrors a shell call's
	// output (terminal.go); released once it was released.
	terminal string
	released bool
}

func (s *toolState) final() bool {
	return s.status == sdk.ToolCallStatusCompleted || s.status == sdk.ToolCallStatusFailed
}

// toolKind is the ACP kind of a metis tool: the editor picks its icon and
// presentation from it.
func toolKind(name string) sdk.ToolKind {
	switch name {
	case "read_file":
		return sdk.ToolKindRead
	case "write_file", "edit_file", "apply_patch":
		return sdk.ToolKindEdit
	case "list_dir", "glob", "grep":
		return sdk.ToolKindSearch
	case "shell", "shell_output", "shell_kill":
		return sdk.ToolKindExecute
	case "web_fetch":
		return sdk.ToolKindFetch
	case "delegate":
		return sdk.ToolKindThink
	}
	return sdk.ToolKindOther
}

type toolInput struct {
	Path    string `json:"path"`
	Command string `json:"command"`
	Task    string `json:"task"`
	Pattern string `json:"pattern"`
	URL     string `json:"url"`
}

func decodeInput(raw json.RawMessage) toolInput {
	var in toolInput
	_ = json.Unmarshal(raw, &in)
	return in
}

// toolTitle is a one-line description of a call, from its input when
// known.
func toolTitle(name string, raw json.RawMessage) string {
	in := decodeInput(raw)
	switch {
	case name == "read_file" && in.Path != "":
		return "Read " + in.Path
	case name == "write_file" && in.Path != "":
		return "Write " + in.Path
	case name == "edit_file" && in.Path != "":
		return "Edit " + in.Path
	case name == "apply_patch":
		return "Apply a patch"
	case (name == "glob" || name == "grep") && in.Pattern != "":
		return "Search " + clip(firstLine(in.Pattern), 80)
	case name == "web_fetch" && in.URL != "":
		return "Fetch " + clip(in.URL, 80)
	case name == "list_dir" && in.Path != "":
		return "List " + in.Path
	case name == "shell" && in.Command != "":
		return "Run " + clip(firstLine(in.Command), 80)
	case name == "delegate" && in.Task != "":
		return "Delegate: " + clip(firstLine(in.Task), 80)
	}
	return name
}

// toolLocations are the files a call touches, as absolute paths.
func toolLocations(name string, raw json.RawMessage, workspace string) []sdk.ToolCallLocation {
	switch name {
	case "read_file", "write_file", "edit_file", "list_dir":
	default:
		return nil
	}
	in := decodeInput(raw)
	if in.Path == "" || workspace == "" {
		return nil
	}
	p := in.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(workspace, p)
	}
	return []sdk.ToolCallLocation{{Path: p}}
}

// rawInput decodes a JSON input for rawInput (nil if it does not decode).
func rawInput(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}

// announce sends tool_call for a call the editor has not seen yet.
func (t *turn) announce(ctx context.Context, id, name string, input json.RawMessage) *toolState {
	if s := t.tools[id]; s != nil {
		return s
	}
	s := &toolState{name: name, status: sdk.ToolCallStatusPending}
	t.tools[id] = s
	t.order = append(t.order, id)
	opts := []sdk.ToolCallStartOpt{sdk.WithStartKind(toolKind(name)), sdk.WithStartStatus(sdk.ToolCallStatusPending)}
	if len(input) > 0 {
		s.input = input
		opts = append(opts, sdk.WithStartRawInput(rawInput(input)))
		if loc := toolLocations(name, input, t.workspace); loc != nil {
			opts = append(opts, sdk.WithStartLocations(loc))
		}
	}
	t.send(ctx, sdk.StartToolCall(sdk.ToolCallId(id), toolTitle(name, input), opts...))
	return s
}

// input sends a call's authoritative input (tool.use_end, tool.called,
// final content), with the title and locations it gives.
func (t *turn) input(ctx context.Context, id, name string, input json.RawMessage) {
	if len(input) == 0 {
		return
	}
	s := t.announce(ctx, id, name, input)
	if string(s.input) == string(input) {
		return
	}
	if s.name == "" {
		s.name = name
	}
	s.input = input
	opts := []sdk.ToolCallUpdateOpt{sdk.WithUpdateRawInput(rawInput(input)), sdk.WithUpdateTitle(toolTitle(s.name, input))}
	if loc := toolLocations(s.name, input, t.workspace); loc != nil {
		opts = append(opts, sdk.WithUpdateLocations(loc))
	}
	t.send(ctx, sdk.UpdateToolCall(sdk.ToolCallId(id), opts...))
}

// toolEvent maps tool.called (in progress, with the input the tool
// runs with), tool.completed (completed, the result as content) and
// tool.failed (failed, the error as content).
func (t *turn) toolEvent(ctx context.Context, typ protocol.EventType, p toolPayload) {
	s := t.announce(ctx, p.ToolUseID, p.ToolName, p.Input)
	if s.final() {
		return
	}
	id := sdk.ToolCallId(p.ToolUseID)
	switch typ {
	case protocol.EventToolCalled:
		s.status = sdk.ToolCallStatusInProgress
		if len(p.Input) > 0 {
			s.input = p.Input
		}
		opts := []sdk.ToolCallUpdateOpt{sdk.WithUpdateStatus(sdk.ToolCallStatusInProgress)}
		if len(p.Input) > 0 {
			opts = append(opts, sdk.WithUpdateRawInput(rawInput(p.Input)), sdk.WithUpdateTitle(toolTitle(s.name, p.Input)))
		}
		t.send(ctx, sdk.UpdateToolCall(id, opts...))
	case protocol.EventToolCompleted:
		s.status = sdk.ToolCallStatusCompleted
		t.outcomes[p.ToolUseID] = outcome{typ, p}
		content := append(s.terminalContent(), t.progressContent(p.ToolUseID)...)
		diff, locs := diffContent(p.Diff, p.DiffTruncated, t.workspace)
		content = append(content, diff...)
		content = append(content, sdk.ToolContent(sdk.TextBlock(p.Result)))
		out := map[string]any{"summary": p.Summary, "truncated": p.Truncated}
		if len(p.Paths) > 0 {
			out["paths"] = p.Paths
			out["diff_truncated"] = p.DiffTruncated
		}
		if p.Via != "" {
			out["via"] = p.Via
		}
		if p.ExitCode != nil {
			out["exit_code"] = *p.ExitCode
		}
		opts := []sdk.ToolCallUpdateOpt{sdk.WithUpdateStatus(sdk.ToolCallStatusCompleted), sdk.WithUpdateContent(content), sdk.WithUpdateRawOutput(out)}
		if len(locs) > 0 {
			opts = append(opts, sdk.WithUpdateLocations(locs))
		}
		t.send(ctx, sdk.UpdateToolCall(id, opts...))
		t.releaseTerminal(s)
	case protocol.EventToolFailed:
		s.status = sdk.ToolCallStatusFailed
		t.outcomes[p.ToolUseID] = outcome{typ, p}
		msg := p.ErrorClass + ": " + p.Message
		if p.ErrorClass == "cancelled" {
			msg = "cancelled: " + p.Message
		}
		content := append(s.terminalContent(), t.progressContent(p.ToolUseID)...)
		content = append(content, sdk.ToolContent(sdk.TextBlock(msg)))
		t.send(ctx, sdk.UpdateToolCall(id, sdk.WithUpdateStatus(sdk.ToolCallStatusFailed), sdk.WithUpdateContent(content),
			sdk.WithUpdateRawOutput(map[string]any{"error_class": p.ErrorClass, "message": p.Message})))
		t.releaseTerminal(s)
	}
}

// storedResult finishes a call from its stored tool_result (after a gap).
func (t *turn) storedResult(ctx context.Context, id, content string, isError bool) {
	s := t.tools[id]
	if s == nil || s.final() {
		return
	}
	if o, ok := t.hist[id]; ok {
		t.toolEvent(ctx, o.typ, o.p) // as it was shown live (session/load)
		return
	}
	typ, p := protocol.EventToolCompleted, toolPayload{ToolUseID: id, ToolName: s.name, Result: content}
	if isError {
		typ, p.ErrorClass, p.Message = protocol.EventToolFailed, "error", content
	}
	t.toolEvent(ctx, typ, p)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// clip shortens s to at most n runes.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
