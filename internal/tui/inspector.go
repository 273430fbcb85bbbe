package tui

import (
	"encoding/json"
	"fmt"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/metis-agent/metis/protocol"
)

// inspectorKeep is how many raw events the inspector holds.
const inspectorKeep = 500

// ring keeps the last max events, oldest first.
type ring struct {
	max   int
	evs   []*protocol.EventEnvelope
	total int
}

func (r *ring) add(ev *protocol.EventEnvelope) {
	r.total++
	if len(r.evs) == r.max {
		copy(r.evs, r.evs[1:])
		r.evs = r.evs[:len(r.evs)-1]
	}
	r.evs = append(r.evs, ev)
}

// last returns up to n of the newest events, oldest first.
func (r *ring) last(n int) []*protocol.EventEnvelope {
	if n >= len(r.evs) {
		return r.evs
	}
	return r.evs[len(r.evs)-n:]
}

// inspectorView lists the newest raw events that fit in height lines:
// time, type and payload, one per line.
func (m *Model) inspectorView(height int) string {
	w := m.width
	title := fmt.Sprintf("events: %d received, newest last (F2 closes)", m.events.total)
	lines := []string{m.st.faint.Render(ansi.Truncate(title, w, "…"))}
	for _, ev := range m.events.last(max(height-2, 0)) {
		ts := ev.TS
		if t, err := time.Parse(time.RFC3339Nano, ev.TS); err == nil {
			ts = t.Local().Format("15:04:05.000")
		}
		typ := m.st.evType.Render(fmt.Sprintf("%-20s", ev.Type))
		if cancelledCall(ev) {
			// A cancel ends the call with llm.call_failed(cancelled): not
			// a failure the user should read as one.
			typ = m.st.cancelled.Render(fmt.Sprintf("%-20s", "llm.call cancelled"))
		}
		line := m.st.faint.Render(ts+" ") + typ + " " + oneLine(string(ev.Payload))
		lines = append(lines, ansi.Truncate(line, w, "…"))
	}
	for len(lines) < height-1 {
		lines = append(lines, "")
	}
	return m.st.inspector.Width(w).Render(lipgloss.JoinVertical(lipgloss.Left, lines...))
}

// cancelledCall reports whether ev is the llm.call_failed a cancel ends
// a model call with.
func cancelledCall(ev *protocol.EventEnvelope) bool {
	if protocol.EventType(ev.Type) != protocol.EventLLMCallFailed {
		return false
	}
	var p struct {
		ErrorClass string `json:"error_class"`
	}
	return json.Unmarshal(ev.Payload, &p) == nil && p.ErrorClass == "cancelled"
}
