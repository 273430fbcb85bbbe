package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// Exit codes of metis tool-output besides the command's own.
const (
	toolOutputFailed    = 1   // the call failed (tool.failed, not a timeout or cancel)
	toolOutputTimeout   = 124 // the call ran past its timeout, as timeout(1) says it
	toolOutputCancelled = 130 // the turn was cancelled, as a shell says for SIGINT
)

// ToolOutput runs `metis tool-output SESSION TOOL_USE_ID [--since ID]
// [--home DIR]`: a read-only mirror of one tool call's live output. It
// follows the session's stream for the call's tool.output_delta events,
// printing stdout's to stdout and stderr's to stderr, from the cursor
// --since (the call's tool.called event: the deltas still in the
// server's ring are replayed first) or from now, and exits once the
// call ends: with the command's exit code after tool.completed, after
// printing the failure after tool.failed. It runs nothing and changes
// nothing; metis acp starts it in an editor's terminal (docs/editors.md).
func ToolOutput(ctx context.Context, args []string, env Env) int {
	fs, cf := newFlags("tool-output", env)
	since := fs.String("since", "", "start after this event id, the call's tool.called (default: from now)")
	home := fs.String("home", "", "the server's home, where its token is found (default $METIS_HOME, else ~/.metis)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 2 {
		fmt.Fprintln(env.Stderr, "usage: metis tool-output SESSION TOOL_USE_ID [--since ID] [--home DIR] [--server URL] [--token-file F]")
		return 2
	}
	c, err := NewClient(client.Locate(ctx, client.LocateOptions{Server: *cf.server, Home: *home}), *cf.tokenFile, *home)
	if err != nil {
		fmt.Fprintln(env.Stderr, "metis tool-output:", err)
		return 1
	}
	m := &outputMirror{call: pos[1], stdout: env.Stdout, stderr: env.Stderr, code: -1}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	filter := protocol.Filter{EventTypes: []string{string(protocol.EventToolOutputDelta),
		string(protocol.EventToolCompleted), string(protocol.EventToolFailed)}}
	err = c.Follow(fctx, pos[0], client.FollowOptions{Filter: filter, Since: *since, NoSnapshot: true, OnUpdate: func(u client.Update) {
		if u.Kind == client.EventApplied && m.event(u.Event) {
			stop()
		}
	}})
	if m.code >= 0 {
		return m.code
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(env.Stderr, "metis tool-output:", explain(err))
	}
	return 1
}

// outputMirror prints one call's live output.
type outputMirror struct {
	call           string
	stdout, stderr io.Writer
	printed        int64 // bytes of the call's output printed (its deltas' offsets)
	missing        bool  // said that the start is missing
	code           int   // the exit code once the call ended, -1 before
}

// event handles one event and reports whether the call ended.
func (m *outputMirror) event(e *protocol.EventEnvelope) bool {
	switch protocol.EventType(e.Type) {
	case protocol.EventToolOutputDelta:
		var p protocol.ToolOutputDeltaPayload
		if json.Unmarshal(e.Payload, &p) != nil || p.ToolUseID != m.call {
			return false
		}
		m.delta(p)
	case protocol.EventToolCompleted:
		var p protocol.ToolCompletedPayload
		if json.Unmarshal(e.Payload, &p) != nil || p.ToolUseID != m.call {
			return false
		}
		m.code = 0
		if p.ExitCode != nil {
			m.code = *p.ExitCode & 0xff
		}
		return true
	case protocol.EventToolFailed:
		var p protocol.ToolFailedPayload
		if json.Unmarshal(e.Payload, &p) != nil || p.ToolUseID != m.call {
			return false
		}
		fmt.Fprintf(m.stderr, "\n[metis: the command failed (%s): %s]\n", p.ErrorClass, firstLine(p.Message))
		switch p.ErrorClass {
		case "timeout":
			m.code = toolOutputTimeout
		case "cancelled":
			m.code = toolOutputCancelled
		default:
			m.code = toolOutputFailed
		}
		return true
	}
	return false
}

// delta prints what a delta adds to what was printed: a replay after a
// resync may repeat output, a ring that let the start go may skip some.
func (m *outputMirror) delta(p protocol.ToolOutputDeltaPayload) {
	if p.Offset > m.printed && !m.missing {
		m.missing = true
		fmt.Fprintf(m.stderr, "[metis: %d bytes of earlier output are no longer held by the server]\n", p.Offset-m.printed)
	}
	data := p.Data
	if skip := m.printed - p.Offset; skip > 0 {
		if skip >= int64(len(data)) {
			data = ""
		} else {
			data = data[skip:]
		}
	}
	w := m.stdout
	if p.Stream == protocol.OutputStderr {
		w = m.stderr
	}
	_, _ = io.WriteString(w, data)
	m.printed = max(m.printed, p.Offset+int64(len(p.Data)))
	if p.Capped {
		fmt.Fprintln(m.stderr, "\n[metis: live output stopped at its cap; the command runs on, and its result holds the first 64 KiB of stdout and of stderr]")
	}
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
