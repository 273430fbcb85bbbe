package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/metis-agent/metis/client"
)

// resultLinesExpanded is how many lines of a tool result are shown when
// expanded.
const resultLinesExpanded = 20

// renderConversation draws every message of the view for the current
// width: user messages, assistant text (plain while it streams, markdown
// once complete), thinking (one line unless expanded), tool calls with
// their input and outcome, worker cards, "(cancelled)" marks and model
// errors.
func (m *Model) renderConversation() string {
	w := m.contentWidth()
	r := &renderer{m: m, w: w, claimed: map[string]bool{}, errs: map[string][]string{}, asked: map[string]bool{}}
	lastOfTurn := map[string]string{}
	for _, msg := range m.view.Messages {
		if msg.TurnID != "" && msg.Role != "tool" {
			lastOfTurn[msg.TurnID] = msg.ID
		}
	}
	var orphans []string
	for _, e := range m.callErrors {
		switch {
		case e.messageID != "" && m.view.Message(e.messageID) != nil:
			r.errs[e.messageID] = append(r.errs[e.messageID], e.text)
		case lastOfTurn[e.turnID] != "":
			r.errs[lastOfTurn[e.turnID]] = append(r.errs[lastOfTurn[e.turnID]], e.text)
		default:
			orphans = append(orphans, e.text)
		}
	}

	notes := map[string][]string{}
	for _, c := range append(append([]compactNote{}, m.compactions...), m.notes...) {
		st := m.st.faint
		if c.kind == noteWarn {
			st = m.st.warn
		}
		notes[c.after] = append(notes[c.after], st.Render(wrapText(c.text, w)))
	}
	parts := notes[""]
	if m.forkedFrom != "" {
		parts = append([]string{m.st.faint.Render(wrap("⑂ forked from session "+m.forkedFrom+": the conversation up to that point is copied here", w))}, parts...)
	}
	for _, msg := range m.view.Messages {
		var s string
		switch msg.Role {
		case "user":
			s = r.user(msg)
		case "assistant":
			s = r.assistant(msg)
		default: // tool results are shown under their calls
		}
		if s != "" {
			parts = append(parts, s)
		}
		if ts := m.turnStats[msg.TurnID]; ts != nil && lastOfTurn[msg.TurnID] == msg.ID {
			parts = append(parts, r.stats(ts))
		}
		parts = append(parts, notes[msg.ID]...)
	}
	// Requests whose call is not on screen (a worker's) get their own
	// prompt at the end.
	for _, p := range m.view.PendingApprovals() {
		if !r.asked[p.ApprovalID] {
			parts = append(parts, m.approvalCard(&p, w))
		}
	}
	// A worker whose delegate call is not on screen gets a card of its
	// own at the end, if it was seen live: the snapshot's workers of
	// calls older than its messages stay out of the way.
	for _, id := range m.workerOrder {
		if w := m.view.Workers[id]; w != nil && !r.claimed[id] {
			r.claimed[id] = true
			parts = append(parts, r.worker(w))
		}
	}
	for _, e := range orphans {
		parts = append(parts, m.st.err.Render(wrapText("✗ "+e, w)))
	}
	if len(parts) == 0 && !m.view.HasOlder {
		return m.st.faint.Render(wrap("No messages yet. Type below and press enter.", w))
	}
	if hint := m.olderHint(); hint != "" {
		parts = append([]string{hint}, parts...)
	}
	return strings.Join(parts, "\n\n")
}

// workerIDs lists the view's workers, first seen first (workers known
// only from a snapshot come last, by id, which sorts by creation time).
func (m *Model) workerIDs() []string {
	seen := map[string]bool{}
	var ids []string
	for _, id := range m.workerOrder {
		if m.view.Workers[id] != nil && !seen[id] {
			ids, seen[id] = append(ids, id), true
		}
	}
	var rest []string
	for id := range m.view.Workers {
		if !seen[id] {
			rest = append(rest, id)
		}
	}
	slices.Sort(rest)
	return append(ids, rest...)
}

// contentWidth is the width the conversation wraps at.
func (m *Model) contentWidth() int {
	return max(m.width-1, 20)
}

// renderer holds one pass over the conversation.
type renderer struct {
	m       *Model
	w       int
	claimed map[string]bool     // workers drawn under their delegate call
	errs    map[string][]string // message id → model errors to show after it
	asked   map[string]bool     // approval ids drawn on their tool's card
}

func (r *renderer) user(msg *client.Message) string {
	var texts, images []string
	for _, b := range msg.Blocks {
		if b.Type == "text" && b.Text != "" {
			texts = append(texts, b.Text)
		}
		if b.Type == "image" {
			images = append(images, r.m.imageChip(b))
		}
		if b.Type == "compaction" {
			return r.m.st.faint.Render(wrap("⟳ the conversation before this point was compacted: the model sees a summary of it", r.w))
		}
	}
	if len(texts) == 0 && len(images) == 0 {
		return ""
	}
	st := r.m.st
	body := wrapText(strings.Join(texts, "\n"), r.w-2)
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		mark := "  "
		if i == 0 {
			mark = st.userMark.Render("› ")
		}
		lines[i] = mark + st.user.Render(l)
	}
	if len(images) > 0 {
		lines = append(lines, "  "+st.faint.Render(wrap(strings.Join(images, " "), r.w-2)))
	}
	if r.steered(msg) {
		lines = append([]string{st.faint.Render("↪ steered into the running turn")}, lines...)
	}
	return strings.Join(lines, "\n")
}

// steered reports a user message that is not its turn's first: it was
// steered into the turn while it ran (turn.steered).
func (r *renderer) steered(msg *client.Message) bool {
	if msg.TurnID == "" {
		return false
	}
	for _, o := range r.m.view.Messages {
		if o == msg {
			return false
		}
		if o.TurnID == msg.TurnID && o.Role == "user" {
			return true
		}
	}
	return false
}

func (r *renderer) assistant(msg *client.Message) string {
	st := r.m.st
	var out []string
	if msg.StartMissing {
		// Joined mid-answer after the server let its start go: what
		// follows is only the end so far; message.complete brings all.
		out = append(out, st.faint.Render("… (the start of this answer is no longer held; it is shown whole once it completes)"))
	}
	for i, b := range msg.Blocks {
		var s string
		switch b.Type {
		case "thinking":
			s = r.thinking(b)
		case "text":
			s = r.text(msg, i, b)
		case "tool_use":
			s = r.toolUse(msg, b)
		}
		if s != "" {
			out = append(out, s)
		}
	}
	switch msg.Status {
	case "cancelled":
		out = append(out, st.cancelled.Render("(cancelled)"))
	case "failed":
		if len(r.errs[msg.ID]) == 0 {
			out = append(out, st.err.Render("(failed)"))
		}
	case "streaming":
		if len(out) == 0 {
			out = append(out, st.faint.Render("…"))
		}
	}
	for _, e := range r.errs[msg.ID] {
		out = append(out, st.err.Render(wrapText("✗ "+e, r.w)))
	}
	return strings.Join(out, "\n")
}

func (r *renderer) thinking(b *client.Block) string {
	n := utf8.RuneCountInString(b.Thinking)
	if !r.m.expanded {
		return r.m.st.thinking.Render(fmt.Sprintf("✻ thinking… (%d chars)", n))
	}
	head := r.m.st.thinking.Render(fmt.Sprintf("✻ thinking (%d chars)", n))
	return head + "\n" + r.m.st.thinking.Render(indent(wrapText(b.Thinking, r.w-2), "  "))
}

// text is plain while the message streams (and when it was cut short),
// markdown once it is complete.
func (r *renderer) text(msg *client.Message, i int, b *client.Block) string {
	if b.Text == "" {
		return ""
	}
	if msg.Status == "complete" {
		if s, ok := r.m.md.render(fmt.Sprintf("%s/%d", msg.ID, i), b.Text, r.w, r.m.dark); ok {
			return s
		}
	}
	return wrapText(b.Text, r.w)
}

// toolUse draws "▸ name {input}" (the raw partial input while it
// streams), then the outcome: running, "✓ summary", "✗ error", or the
// call struck through when it was cancelled. A delegate call shows its
// worker's card.
func (r *renderer) toolUse(msg *client.Message, b *client.Block) string {
	st := r.m.st
	input := compactJSON(b.Input)
	if b.PartialInput != "" {
		// Still streaming (a snapshot's block has input {} meanwhile).
		input = strings.Join(strings.Fields(b.PartialInput), " ") + " …"
	}
	if input == "" && msg.Status == "streaming" {
		input = "…"
	}
	head := "▸ " + b.Name
	if cmd := shellCommand(b); cmd != "" {
		head += " $ " + oneLine(cmd)
	} else if input != "" {
		head += " " + input
	}
	head = printable(head)
	if r.m.expanded {
		head = wrap(head, r.w)
	} else {
		head = ansi.Truncate(head, r.w, "…")
	}
	tc := r.m.view.Tools[b.ID]
	status := ""
	if tc != nil {
		status = tc.Status
	}
	if status == "cancelled" {
		return st.struck.Render(head) + "\n" + st.cancelled.Render("  ✗ cancelled")
	}
	lines := []string{st.tool.Render(head)}
	var card string
	if b.Name == "delegate" {
		card = r.workerFor(b, tc)
	}
	switch status {
	case "running":
		lines = append(lines, r.liveCard(b.ID))
	case client.ToolAwaitingApproval:
		for _, p := range r.m.view.PendingApprovals() {
			if p.ToolUseID == b.ID && !r.asked[p.ApprovalID] {
				r.asked[p.ApprovalID] = true
				lines = append(lines, r.m.approvalCard(&p, r.w))
				break
			}
		}
	case "completed":
		if card == "" {
			lines = append(lines, r.result(tc))
		}
	case "failed":
		msg := tc.Error
		if tc.ErrorClass != "" {
			msg = tc.ErrorClass + ": " + msg
		}
		lines = append(lines, st.err.Render(indent(wrapText("✗ "+firstLines(msg, 3), r.w-2), "  ")))
	}
	if card != "" {
		lines = append(lines, card)
	}
	return strings.Join(lines, "\n")
}

// shellCommand is the command line of a shell call ("" for other tools,
// or while its input streams).
func shellCommand(b *client.Block) string {
	if b.Name != "shell" || b.PartialInput != "" {
		return ""
	}
	var in struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal(b.Input, &in)
	return in.Command
}

// stats is a finished turn's line of totals.
func (r *renderer) stats(ts *turnStats) string {
	st := r.m.st.faint
	switch ts.outcome {
	case "failed":
		st = r.m.st.err
	case "cancelled":
		st = r.m.st.cancelled
	}
	return st.Render(ansi.Truncate(ts.line(), r.w, "…"))
}

// workerFor finds the worker a delegate call started (by its task) and
// draws its card. A call whose delegate.* events the view never saw (it
// was rebuilt from a snapshot) gets a card drawn from the call itself:
// its task, and its outcome once it has one.
func (r *renderer) workerFor(b *client.Block, tc *client.ToolCall) string {
	var in struct {
		Task  string `json:"task"`
		Model string `json:"model"`
	}
	if json.Unmarshal(b.Input, &in) != nil || in.Task == "" {
		return ""
	}
	for _, id := range r.m.workerIDs() {
		w := r.m.view.Workers[id]
		if !r.claimed[id] && w.Task == in.Task {
			r.claimed[id] = true
			return r.worker(w)
		}
	}
	if tc == nil || tc.Status != "completed" {
		return "" // running or failed: the call's own lines say so
	}
	return r.workerCard(&client.Worker{Task: in.Task, Model: in.Model, Status: "completed",
		Summary: oneLine(firstLines(tc.Result, 1))}, tc.Result)
}

// worker is a card: one line collapsed, a bordered box expanded.
func (r *renderer) worker(w *client.Worker) string { return r.workerCard(w, "") }

// workerCard draws a worker's card; result, if any, is the worker's
// answer, shown in the expanded card.
func (r *renderer) workerCard(w *client.Worker, result string) string {
	st := r.m.st
	state := w.Status
	switch w.Status {
	case "running":
		state = "running…"
	case "completed":
		state = "completed"
		if w.Summary != "" {
			state += ": " + w.Summary
		}
	case "failed":
		state = "failed"
		if w.FailureMode != "" {
			state += ": " + w.FailureMode
		}
	}
	name := "⧉ worker"
	if w.SessionID != "" {
		name += " " + w.SessionID
	}
	if !r.m.expanded {
		line := fmt.Sprintf("%s : %s — %s", name, oneLine(w.Task), state)
		return st.worker.Render(ansi.Truncate(line, r.w, "…"))
	}
	inner := r.w - 4
	var b strings.Builder
	b.WriteString(name)
	if w.Model != "" {
		fmt.Fprintf(&b, " (%s)", w.Model)
	}
	b.WriteString("\n" + wrapText("task: "+w.Task, inner))
	b.WriteString("\n" + wrapText("status: "+state, inner))
	if w.CostUSD > 0 {
		fmt.Fprintf(&b, "\ncost: $%.4f", w.CostUSD)
	}
	if result != "" {
		b.WriteString("\n" + truncateLines(printableLines(firstLines(result, resultLinesExpanded)), inner))
	}
	return st.card.Width(r.w).Render(b.String())
}

// wrapText word-wraps text that came from the stream (a model's, a
// tool's or a user's) after making each line printable: escape
// sequences and control characters in it must not drive the terminal.
func wrapText(s string, width int) string { return wrap(printableLines(s), width) }

// wrap word-wraps s to width, breaking long words. s may be styled;
// text from the stream goes through wrapText.
func wrap(s string, width int) string {
	if width <= 0 {
		return s
	}
	return lipgloss.Wrap(s, width, "")
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}

// truncateLines cuts each line of s to width.
func truncateLines(s string, width int) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, width, "…")
	}
	return strings.Join(lines, "\n")
}

// oneLine is s made printable (printable) on one line, runs of spaces
// folded.
func oneLine(s string) string { return strings.Join(strings.Fields(printable(s)), " ") }

// compactJSON is raw JSON on one line ("" when empty).
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return oneLine(string(raw))
	}
	return b.String()
}
