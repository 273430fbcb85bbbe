package tui

import (
	"errors"
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// approvalUI is the approval prompt's state. While a request waits, the
// prompt holds the keyboard: y allows once, a allows for the session, n
// asks for an optional reason (typed in the composer, enter denies, esc
// goes back), esc cancels the turn.
type approvalUI struct {
	reasonFor string // the approval a reason is being typed for
	draft     string // the composer's text, put back after the reason
	sending   string // the approval whose answer is on its way
}

// approvedMsg is the answer of Approve.
type approvedMsg struct {
	id  string
	res client.Resolution
	err error
}

// pending is the oldest approval request waiting for an answer (nil:
// none).
func (m *Model) pending() *client.PendingApproval {
	ps := m.view.PendingApprovals()
	if len(ps) == 0 {
		return nil
	}
	return &ps[0]
}

// approvalKey handles a key while a request waits; it reports whether
// it claimed the key.
func (m *Model) approvalKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	p := m.pending()
	if m.approval.reasonFor != "" {
		switch k.String() {
		case "enter":
			reason := strings.TrimSpace(m.composer.Value())
			id := m.approval.reasonFor
			m.endReason()
			if p == nil || p.ApprovalID != id {
				m.setFlash("that request was already decided", false)
				return nil, true
			}
			return m.answer(p, protocol.DecisionDeny, protocol.ScopeOnce, reason), true
		case "esc":
			m.endReason()
			return nil, true
		}
		return nil, false // the composer takes the reason's keys
	}
	if p == nil {
		return nil, false
	}
	switch k.String() {
	case "y", "Y":
		return m.answer(p, protocol.DecisionAllow, protocol.ScopeOnce, ""), true
	case "a", "A":
		return m.answer(p, protocol.DecisionAllow, protocol.ScopeSession, ""), true
	case "n", "N":
		m.approval.reasonFor, m.approval.draft = p.ApprovalID, m.composer.Value()
		m.composer.Reset()
		m.composer.Placeholder = "why not? (optional, the model is told) — enter denies, esc goes back"
		return nil, true
	}
	return nil, false
}

// endReason leaves the reason input, putting the composer's draft back.
func (m *Model) endReason() {
	m.composer.SetValue(m.approval.draft)
	m.composer.Placeholder = composerPlaceholder
	m.approval.reasonFor, m.approval.draft = "", ""
}

// answer sends a decision.
func (m *Model) answer(p *client.PendingApproval, decision, scope, reason string) tea.Cmd {
	if m.approval.sending == p.ApprovalID {
		return nil
	}
	m.approval.sending = p.ApprovalID
	ctx, api, sid, id := m.ctx, m.api, m.sessionID, p.ApprovalID
	ans := protocol.ApprovalAnswer{Decision: decision, Scope: scope, Reason: reason}
	return func() tea.Msg {
		res, err := api.Approve(ctx, sid, id, ans)
		return approvedMsg{id: id, res: res, err: err}
	}
}

// approved records the answer of Approve; the approval.resolved event
// takes the request off the screen.
func (m *Model) approved(msg approvedMsg) {
	if m.approval.sending == msg.id {
		m.approval.sending = ""
	}
	var re *client.ResolvedError
	switch {
	case errors.As(msg.err, &re):
		m.setFlash(fmt.Sprintf("already decided: %s (%s)", re.Resolution.Decision, re.Resolution.Reason), false)
	case msg.err != nil:
		m.setFlash("answer not sent: "+errText(msg.err), true)
	}
}

// approvalTarget is what a request is about: "$ command", the paths, or
// the tool's input, made printable (a sequence that erases the line must
// not hide part of a command the user is asked about).
func approvalTarget(p *client.PendingApproval) string {
	if len(p.Targets) > 0 {
		t := printableLines(strings.Join(p.Targets, ", "))
		if p.Kind == "execute" || p.ToolName == "shell" {
			return "$ " + t
		}
		return t
	}
	return compactJSON(p.Input)
}

// approvalCard draws a waiting request: what it would do, the change it
// would make, why it asks, and the keys.
func (m *Model) approvalCard(p *client.PendingApproval, width int) string {
	st := m.st
	inner := max(width-4, 10)
	var b []string
	who := p.ToolName
	if p.SessionID != "" && p.SessionID != m.sessionID {
		who += " (worker " + p.SessionID + ")"
	}
	b = append(b, st.warn.Render("⏸ "+who+" waits for your approval"))
	b = append(b, wrapText(approvalTarget(p), inner))
	if change := proposedChange(p.ToolName, p.Input); change != "" {
		limit := diffLinesCollapsed
		if m.expanded {
			limit = diffLinesExpanded
		}
		b = append(b, m.renderDiff(change, limit, inner))
	}
	if p.Reason != "" {
		b = append(b, st.faint.Render(wrapText("asks because: "+p.Reason, inner)))
	}
	b = append(b, m.approvalKeys(inner))
	return st.prompt.Width(width).Render(strings.Join(b, "\n"))
}

// approvalKeys is the prompt's line of keys (or what is happening).
func (m *Model) approvalKeys(width int) string {
	st := m.st
	switch {
	case m.approval.reasonFor != "":
		return st.warn.Render(ansi.Truncate("denying: type a reason below (optional), enter to deny, esc to go back", width, "…"))
	case m.approval.sending != "":
		return st.faint.Render("sending your answer…")
	}
	keys := st.key.Render("y") + " allow once · " + st.key.Render("a") + " allow for this session · " +
		st.key.Render("n") + " deny · " + st.key.Render("esc") + " cancel the turn"
	return ansi.Truncate(keys, width, "…")
}
