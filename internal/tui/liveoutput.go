package tui

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/metis-agent/metis/protocol"
)

// A running shell command's live output (tool.output_delta): the last
// few lines are kept per call and shown on its card while it runs; the
// result replaces them at tool.completed or tool.failed. Memory is
// bounded: liveLines lines of at most liveLineMax bytes per running
// call, and a call's lines are dropped when it ends.

const (
	// liveLines is how many lines of a running command's output its
	// card shows (and the TUI keeps).
	liveLines = 8
	// liveLineMax is how many bytes of one line are kept; the rest of
	// the line is dropped (the card cuts it to the width anyway).
	liveLineMax = 512
)

// liveLine is one line of output and the stream it came on.
type liveLine struct {
	text   string
	stderr bool
}

// liveOutput is what a running call printed, as far as the card shows it.
type liveOutput struct {
	lines   []liveLine // the newest complete lines, at most liveLines
	partial liveLine   // the line being written (no line break yet)
	cr      bool       // a carriage return came: the next text rewrites partial
	total   int        // complete lines seen
	seen    bool       // a delta came
	missed  bool       // the first delta seen did not start at offset 0
	capped  bool       // the server stopped streaming the call's output
}

// add folds one delta in. Lines end at "\n"; a "\r" (a progress bar)
// makes the next text replace the line, as a terminal would; when the
// stream changes mid-line, the line ends there.
func (o *liveOutput) add(p *protocol.ToolOutputDeltaPayload) {
	if !o.seen {
		o.seen, o.missed = true, p.Offset > 0
	}
	if p.Capped {
		o.capped = true
	}
	stderr := p.Stream == protocol.OutputStderr
	if o.partial.text != "" && o.partial.stderr != stderr {
		o.push()
	}
	o.partial.stderr = stderr
	data := p.Data
	for {
		i := strings.IndexAny(data, "\r\n")
		if i < 0 {
			o.write(data)
			return
		}
		o.write(data[:i])
		if data[i] == '\n' {
			o.push()
		} else {
			o.cr = true
		}
		data = data[i+1:]
	}
}

// write appends s to the line being written, up to liveLineMax bytes.
func (o *liveOutput) write(s string) {
	if s == "" {
		return
	}
	if o.cr {
		o.partial.text, o.cr = "", false
	}
	room := liveLineMax - len(o.partial.text)
	if room <= 0 {
		return
	}
	if len(s) > room {
		s = s[:room]
		for s != "" && !utf8.ValidString(s) {
			s = s[:len(s)-1] // not in the middle of a character
		}
	}
	o.partial.text += s
}

// push ends the line being written.
func (o *liveOutput) push() {
	if len(o.lines) == liveLines {
		copy(o.lines, o.lines[1:])
		o.lines = o.lines[:liveLines-1]
	}
	o.lines = append(o.lines, o.partial)
	o.partial = liveLine{stderr: o.partial.stderr}
	o.cr = false
	o.total++
}

// tail is the lines the card shows: the newest, the one being written
// last, at most liveLines.
func (o *liveOutput) tail() []liveLine {
	out := o.lines
	if o.partial.text != "" {
		out = append(append([]liveLine{}, o.lines...), o.partial)
	}
	if len(out) > liveLines {
		out = out[len(out)-liveLines:]
	}
	return out
}

// lineCount is how many lines the command printed that the TUI saw
// (the one being written included).
func (o *liveOutput) lineCount() int {
	if o.partial.text != "" {
		return o.total + 1
	}
	return o.total
}

// observeLive keeps the live output of the session's running shell
// calls and forgets a call's once it ends (or its turn does).
func (m *Model) observeLive(ev *protocol.EventEnvelope) {
	if ev.SessionID != m.sessionID {
		return // a worker's calls have no card here
	}
	switch protocol.EventType(ev.Type) {
	case protocol.EventToolOutputDelta:
		var p protocol.ToolOutputDeltaPayload
		if json.Unmarshal(ev.Payload, &p) != nil || p.ToolUseID == "" {
			return
		}
		if tc := m.view.Tools[p.ToolUseID]; tc != nil && tc.Status != "running" {
			return // a late delta of a call already ended
		}
		o := m.live[p.ToolUseID]
		if o == nil {
			o = &liveOutput{}
			m.live[p.ToolUseID] = o
		}
		o.add(&p)
	case protocol.EventToolCompleted, protocol.EventToolFailed:
		var p struct {
			ToolUseID string `json:"tool_use_id"`
		}
		if json.Unmarshal(ev.Payload, &p) == nil {
			delete(m.live, p.ToolUseID)
		}
	case protocol.EventTurnCompleted, protocol.EventTurnCancelled:
		clear(m.live)
	}
}

// liveCard is the "⋯ running" line of a running call and, for a shell
// command that printed something, its last lines.
func (r *renderer) liveCard(toolUseID string) string {
	st := r.m.st
	head := "  ⋯ running"
	o := r.m.live[toolUseID]
	if o == nil {
		return st.faint.Render(head)
	}
	tail := o.tail()
	var notes []string
	if o.missed {
		notes = append(notes, "joined mid-output")
	}
	if n := o.lineCount(); n > len(tail) && !o.missed {
		notes = append(notes, fmt.Sprintf("last %d of %d lines", len(tail), n))
	} else if n > len(tail) {
		notes = append(notes, fmt.Sprintf("last %d lines", len(tail)))
	}
	if o.capped {
		notes = append(notes, "live output capped: the command runs on")
	}
	if len(notes) > 0 {
		head += " · " + strings.Join(notes, " · ")
	}
	lines := []string{st.faint.Render(ansi.Truncate(head, r.w, "…"))}
	for _, l := range tail {
		s := st.faint
		if l.stderr {
			s = st.err.Faint(true)
		}
		lines = append(lines, s.Render("    "+ansi.Truncate(printable(l.text), r.w-4, "…")))
	}
	return strings.Join(lines, "\n")
}

// printable is a command's output line made safe to draw: escape
// sequences (colours, cursor moves) and control characters dropped,
// tabs expanded.
func printable(s string) string {
	return clean(expandTabs(ansi.Strip(s)))
}
