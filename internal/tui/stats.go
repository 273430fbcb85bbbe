package tui

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/metis-agent/metis/protocol"
)

// toolDiff is the change a file tool made (tool.completed's paths, diff
// and diff_truncated).
type toolDiff struct {
	paths     []string
	diff      string
	truncated bool
}

// turnStats are a finished turn's totals (turn.completed or
// turn.cancelled): shown under its last message.
type turnStats struct {
	outcome      string // completed, failed, cancelled
	inputTokens  int64
	outputTokens int64
	costUSD      float64
	duration     time.Duration
	calls        int
}

// compactNote is a compaction seen live, shown after the message that
// was last when it happened.
type compactNote struct {
	after string // message id ("" : at the top)
	text  string
	kind  noteKind
}

// observeMore keeps what observe needs beyond the deltas and errors:
// diffs, turn totals, the context gauge, compactions and the title.
func (m *Model) observeMore(ev *protocol.EventEnvelope) {
	turn := ""
	if ev.TurnID != nil {
		turn = *ev.TurnID
	}
	switch protocol.EventType(ev.Type) {
	case protocol.EventToolCompleted:
		var p protocol.ToolCompletedPayload
		if json.Unmarshal(ev.Payload, &p) != nil {
			return
		}
		if p.Diff != "" || len(p.Paths) > 0 {
			m.diffs[p.ToolUseID] = &toolDiff{paths: p.Paths, diff: p.Diff, truncated: p.DiffTruncated}
		}
	case protocol.EventTurnCompleted, protocol.EventTurnCancelled:
		if ev.SessionID != m.sessionID {
			return // a worker's
		}
		var p struct {
			Outcome string `json:"outcome"`
			Usage   struct {
				InputTokens  int64   `json:"input_tokens"`
				OutputTokens int64   `json:"output_tokens"`
				CostUSD      float64 `json:"cost_usd"`
			} `json:"usage"`
			LLMCalls   int   `json:"llm_calls"`
			DurationMS int64 `json:"duration_ms"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		if protocol.EventType(ev.Type) == protocol.EventTurnCancelled {
			p.Outcome = "cancelled"
		}
		m.turnStats[turn] = &turnStats{outcome: p.Outcome, inputTokens: p.Usage.InputTokens,
			outputTokens: p.Usage.OutputTokens, costUSD: p.Usage.CostUSD,
			duration: time.Duration(p.DurationMS) * time.Millisecond, calls: p.LLMCalls}
	case protocol.EventLLMCallStarted, protocol.EventLLMCallCompleted:
		if ev.SessionID != m.sessionID {
			return
		}
		var p struct {
			ContextTokens int64 `json:"context_tokens"`
			ContextWindow int64 `json:"context_window"`
			Request       struct {
				ContextTokens int64 `json:"context_tokens"`
				ContextWindow int64 `json:"context_window"`
			} `json:"request"`
		}
		if json.Unmarshal(ev.Payload, &p) != nil {
			return
		}
		if p.ContextTokens == 0 && p.ContextWindow == 0 {
			p.ContextTokens, p.ContextWindow = p.Request.ContextTokens, p.Request.ContextWindow
		}
		if p.ContextTokens > 0 {
			m.ctxTokens = p.ContextTokens
		}
		if p.ContextWindow > 0 {
			m.ctxWindow = p.ContextWindow
		}
	case protocol.EventContextCompacting:
		if ev.SessionID == m.sessionID {
			m.compacting = true
		}
	case protocol.EventContextCompacted:
		if ev.SessionID != m.sessionID {
			return
		}
		m.compacting = false
		var p struct {
			TokensBefore int64  `json:"tokens_before"`
			TokensAfter  int64  `json:"tokens_after"`
			Trigger      string `json:"trigger"`
			Method       string `json:"method"`
			Error        string `json:"error"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		if p.TokensAfter > 0 {
			m.ctxTokens = p.TokensAfter
		}
		text := fmt.Sprintf("⟳ conversation compacted (%s, %s): %s → %s tokens", p.Trigger, p.Method,
			humanTokens(p.TokensBefore), humanTokens(p.TokensAfter))
		if p.Error != "" {
			text += " — summarising failed: " + oneLine(p.Error)
		}
		m.compactions = append(m.compactions, compactNote{after: m.lastMessageID(), text: text})
	case protocol.EventContextCompactionFailed:
		if ev.SessionID != m.sessionID {
			return
		}
		m.compacting = false
		var p struct {
			ErrorClass string `json:"error_class"`
			Message    string `json:"message"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		if p.ErrorClass == "no_progress" {
			m.setFlash("nothing to compact yet: "+oneLine(p.Message), false)
		} else {
			m.setFlash("compaction "+p.ErrorClass+": "+oneLine(p.Message), p.ErrorClass != "cancelled")
		}
	case protocol.EventTurnStarted:
		if ev.SessionID == m.sessionID {
			m.titleAsk = true // the first turn names the session
		}
	case protocol.EventSessionUpdated:
		if ev.SessionID == m.sessionID {
			m.edited()
		}
	}
}

// fromSummary takes the title, archived flag, mode and context gauge of
// the view's session summary (the snapshot's, kept current by
// session.updated).
func (m *Model) fromSummary() {
	var s protocol.SessionSummary
	if json.Unmarshal(m.view.Session, &s) != nil {
		return
	}
	if s.Title != "" {
		m.title = s.Title
	}
	m.archived = s.Archived
	if f := s.ForkedFrom; f != nil {
		m.forkedFrom = f.SessionID
	}
	if s.ContextTokens > 0 {
		m.ctxTokens = s.ContextTokens
	}
	if s.ContextWindow > 0 {
		m.ctxWindow = s.ContextWindow
	}
}

// lastMessageID is the id of the view's newest message ("" if none).
func (m *Model) lastMessageID() string {
	if n := len(m.view.Messages); n > 0 {
		return m.view.Messages[n-1].ID
	}
	return ""
}

// gauge is the context gauge: "ctx 12.3k/200k 6%", "ctx 12.3k" when
// the window is unknown, "" before the first call.
func (m *Model) gauge() string {
	if m.ctxTokens <= 0 {
		return ""
	}
	if m.ctxWindow <= 0 {
		return "ctx " + humanTokens(m.ctxTokens)
	}
	return fmt.Sprintf("ctx %s/%s %d%%", humanTokens(m.ctxTokens), humanTokens(m.ctxWindow), m.ctxTokens*100/m.ctxWindow)
}

// gaugeFull reports whether the context is past 80% of the window.
func (m *Model) gaugeFull() bool {
	return m.ctxWindow > 0 && m.ctxTokens*5 > m.ctxWindow*4
}

// humanTokens is a token count in a few characters: 950, 12.3k, 1.2M.
func humanTokens(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 10_000:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1000), ".0") + "k"
	case n < 1_000_000:
		return fmt.Sprintf("%dk", (n+500)/1000)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e6), ".0") + "M"
}

// statsLine is a finished turn's totals: "✓ done in 2.3s · 1.2k in · 56
// out · $0.0012 · 2 calls".
func (t *turnStats) line() string {
	var head string
	switch t.outcome {
	case "failed":
		head = "✗ failed after"
	case "cancelled":
		head = "■ cancelled after"
	default:
		head = "✓ done in"
	}
	parts := []string{fmt.Sprintf("%s %s", head, humanDuration(t.duration))}
	if t.inputTokens > 0 || t.outputTokens > 0 {
		parts = append(parts, humanTokens(t.inputTokens)+" in", humanTokens(t.outputTokens)+" out")
	}
	parts = append(parts, fmt.Sprintf("$%.4f", t.costUSD))
	if t.calls > 1 {
		parts = append(parts, fmt.Sprintf("%d calls", t.calls))
	}
	return strings.Join(parts, " · ")
}

// humanDuration is a duration rounded for people: 850ms, 2.3s, 1m05s.
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
