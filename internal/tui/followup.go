package tui

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// Follow-ups (docs/conversation.md): enter while a turn runs queues the
// message after it, ctrl+s steers it into the running turn; /image
// attaches images to the next message. The queue panel above the input
// shows the queued and steered messages and the attachments.

// maxAttached is the most images a message takes (the server's default
// max-images; a server set lower refuses the message and keeps nothing).
const maxAttached = 10

// maxPanelRows is the most rows of queued and steered messages shown.
const maxPanelRows = 3

// steer is a message sent with "steer": true that the running turn has
// not taken yet (turn.steered), nor handed back to the queue.
type steer struct {
	messageID string
	preview   string
}

// attachment is an image /image read for the next message.
type attachment struct {
	name  string
	image client.ImageInput
}

// Messages of the follow-up calls.
type (
	attachedMsg struct {
		att  attachment
		path string
		err  error
	}
	unqueuedMsg struct {
		preview string
		err     error
	}
)

// send submits the composer's text: a slash command the TUI handles is
// run; otherwise the message goes with "queue": true (it starts a turn
// when the session is idle, and waits behind the running one when not),
// or, with steer, "steer": true into the running turn.
func (m *Model) send(steer bool) tea.Cmd {
	text := strings.TrimSpace(m.composer.Value())
	if strings.HasPrefix(text, "/") {
		if cmd, ok := m.command(text); ok {
			m.composer.Reset()
			return cmd
		}
	}
	switch {
	case text == "" && len(m.attached) > 0:
		m.setFlash("write a message to go with the image", true)
		return nil
	case text == "":
		return nil
	case m.submitting:
		m.setFlash("the last message is still being sent", true)
		return nil
	case m.followErr != nil:
		m.setFlash("not connected to the session", true)
		return nil
	}
	m.composer.Reset()
	m.vp.GotoBottom()
	m.submitting = true
	m.flash = ""
	req := client.TurnRequest{Content: text, Queue: !steer, Steer: steer}
	if !steer && m.modelPin != "" && !strings.HasPrefix(text, "/model ") {
		req.Content = "/model " + m.modelPin + " " + text
	}
	atts := m.attached
	for _, a := range atts {
		req.Images = append(req.Images, a.image)
	}
	m.attached = nil
	m.relayout()
	ctx, api, sid := m.ctx, m.api, m.sessionID
	return func() tea.Msg {
		acc, err := api.SubmitTurn(ctx, sid, req)
		return submittedMsg{acc: acc, err: err, text: text, steer: steer, atts: atts}
	}
}

// submitted records the answer of SubmitTurn: a turn started (followed
// as the current turn), queued (the queue panel shows it from its
// turn.queued) or a message steered (shown as steering until the turn
// takes it). A refused message goes back to the input.
func (m *Model) submitted(msg submittedMsg) tea.Cmd {
	m.submitting = false
	if msg.err != nil {
		m.cancelAfter = false
		if m.composer.Value() == "" {
			m.composer.SetValue(msg.text)
		}
		if len(m.attached) == 0 {
			m.attached = msg.atts
		}
		m.relayout()
		switch {
		case client.IsCode(msg.err, protocol.CodeTurnCancelling):
			m.setFlash("the turn is being cancelled: it takes no more messages; press enter to queue this one instead", true)
		case client.IsCode(msg.err, protocol.CodeQueueFull):
			m.setFlash("the queue is full: wait for a turn to end, or /unqueue one", true)
		default:
			m.setFlash("not sent: "+errText(msg.err), true)
		}
		return nil
	}
	for _, a := range msg.atts {
		sum := sha256.Sum256(a.image.Data)
		m.imageNames[hex.EncodeToString(sum[:])] = a.name
	}
	acc := msg.acc
	switch {
	case acc.Steered:
		m.steering = append(m.steering, steer{messageID: acc.MessageID, preview: oneLine(msg.text)})
		m.relayout()
		m.setFlash("steered: the model reads it at its next call", false)
		return nil
	case acc.Queued:
		m.setFlash(fmt.Sprintf("queued (%s in line): it runs when the turn before it ends", ordinal(acc.Position)), false)
		return nil
	}
	if t := m.view.Turn; !(t.ID == acc.TurnID && t.Status != protocol.TurnStatusInFlight) {
		m.pendingTurn = acc.TurnID // not already over (its events may arrive first)
	}
	if m.cancelAfter {
		m.cancelAfter, m.flash = false, ""
		return m.cancel()
	}
	return nil
}

// ordinal is 1st, 2nd, 3rd, 4th…
func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return strconv.Itoa(n) + "th"
	case n%10 == 1:
		return strconv.Itoa(n) + "st"
	case n%10 == 2:
		return strconv.Itoa(n) + "nd"
	case n%10 == 3:
		return strconv.Itoa(n) + "rd"
	}
	return strconv.Itoa(n) + "th"
}

// followUpSeen drops the steered messages the stream has settled: taken
// by the turn (turn.steered) or handed back as a queued turn.
func (m *Model) followUpSeen(ev *protocol.EventEnvelope) {
	if len(m.steering) == 0 {
		return
	}
	switch protocol.EventType(ev.Type) {
	case protocol.EventTurnSteered, protocol.EventTurnQueued:
	default:
		return
	}
	var p struct {
		UserMessage struct {
			ID string `json:"id"`
		} `json:"user_message"`
	}
	if json.Unmarshal(ev.Payload, &p) != nil {
		return
	}
	m.dropSteer(p.UserMessage.ID)
	if strings.HasPrefix(m.flash, "steered:") {
		m.flash = "" // settled: the conversation or the queue shows it
	}
}

// dropSteer forgets a steered message, and the ones a snapshot shows
// settled.
func (m *Model) dropSteer(id string) {
	kept := m.steering[:0]
	for _, s := range m.steering {
		if s.messageID == id || m.view.Message(s.messageID) != nil || m.isQueued(s.messageID) {
			continue
		}
		kept = append(kept, s)
	}
	m.steering = kept
}

func (m *Model) isQueued(messageID string) bool {
	for _, q := range m.view.Queued {
		if q.MessageID == messageID {
			return true
		}
	}
	return false
}

// dequeuedNote shows a queued turn cancelled before it started (its
// turn.cancelled, phase queued) where the conversation is: called before
// the view forgets it.
func (m *Model) dequeuedNote(ev *protocol.EventEnvelope) {
	if protocol.EventType(ev.Type) != protocol.EventTurnCancelled || ev.TurnID == nil || ev.SessionID != m.sessionID {
		return
	}
	for _, q := range m.view.Queued {
		if q.TurnID != *ev.TurnID {
			continue
		}
		var p struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		text := "⧗ taken out of the queue before it ran: " + q.Preview
		if p.Reason == protocol.CancelReasonStartFailed {
			text = "✗ a queued message could not start: " + q.Preview
		}
		m.addNote(text, noteFaint)
		return
	}
}

// unqueue cancels queued message n (1 the next; 0 the last) before it
// starts.
func (m *Model) unqueue(arg string) tea.Cmd {
	q := m.view.Queued
	if len(q) == 0 {
		m.setFlash("nothing is queued", true)
		return nil
	}
	n := len(q)
	if arg != "" {
		var err error
		if n, err = strconv.Atoi(arg); err != nil || n < 1 || n > len(q) {
			m.setFlash(fmt.Sprintf("/unqueue N: N is a queued message's number, 1 to %d", len(q)), true)
			return nil
		}
	}
	t := q[n-1]
	ctx, api, sid := m.ctx, m.api, m.sessionID
	return func() tea.Msg {
		return unqueuedMsg{preview: t.Preview, err: api.Cancel(ctx, sid, t.TurnID, "user_cancel")}
	}
}

// attachImage reads an image file for the next message (/image PATH).
func (m *Model) attachImage(arg string) tea.Cmd {
	switch arg {
	case "":
		if len(m.attached) == 0 {
			m.setFlash("/image PATH attaches a PNG, JPEG, GIF or WebP image to the next message", false)
		} else {
			m.setFlash(fmt.Sprintf("%d image(s) go with the next message · /image clear drops them", len(m.attached)), false)
		}
		return nil
	case "clear", "-":
		m.attached = nil
		m.relayout()
		m.setFlash("no image goes with the next message", false)
		return nil
	}
	if len(m.attached) >= maxAttached {
		m.setFlash(fmt.Sprintf("a message takes at most %d images", maxAttached), true)
		return nil
	}
	path := arg
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, rest)
		}
	}
	return func() tea.Msg {
		img, err := client.ImageFile(path)
		return attachedMsg{att: attachment{name: filepath.Base(path), image: img}, path: path, err: err}
	}
}

// attachedResult takes an image read for the next message.
func (m *Model) attachedResult(msg attachedMsg) {
	if msg.err != nil {
		// The file's name says enough (the path may fill the line).
		m.setFlash("not attached: "+strings.ReplaceAll(msg.err.Error(), msg.path, msg.att.name), true)
		return
	}
	m.attached = append(m.attached, msg.att)
	m.relayout()
	m.setFlash("attached "+msg.att.name+": it goes with your next message", false)
}

// chip is an image as the panel and the conversation show it:
// "[image: cat.png 120 KB]".
func chip(name string, size int64, w, h int) string {
	s := "[image: " + name
	if w > 0 && h > 0 {
		s += fmt.Sprintf(" %d×%d", w, h)
	}
	return s + " " + humanBytes(size) + "]"
}

// humanBytes is a size in a few characters: 512 B, 120 KB, 4.2 MB.
func humanBytes(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return fmt.Sprintf("%d KB", (n+512)/1024)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1024*1024)), ".0") + " MB"
}

// imageChip is an image block of a user message as a placeholder.
func (m *Model) imageChip(b *client.Block) string {
	name := m.imageNames[b.SHA256]
	if name == "" {
		name = strings.TrimPrefix(b.MediaType, "image/")
	}
	return chip(name, b.Size, b.Width, b.Height)
}

// panelLines are the queue panel's lines: the messages steered into the
// turn and not taken yet, the queued ones (at most maxPanelRows, then
// how many more), and the images attached to the next message.
func (m *Model) panelLines() []string {
	var rows []string
	for _, s := range m.steering {
		rows = append(rows, "↪ steering: "+s.preview+" (the model reads it at its next call)")
	}
	for i, q := range m.view.Queued {
		r := fmt.Sprintf("⧗ %d queued: %s", i+1, q.Preview)
		if q.Images > 0 {
			r += fmt.Sprintf(" [+%d image(s)]", q.Images)
		}
		if i == 0 {
			r += "  · /unqueue N removes one"
		}
		rows = append(rows, r)
	}
	if len(rows) > maxPanelRows {
		more := len(rows) - maxPanelRows + 1
		rows = append(rows[:maxPanelRows-1], fmt.Sprintf("… and %d more", more))
	}
	if len(m.attached) > 0 {
		var chips []string
		for _, a := range m.attached {
			chips = append(chips, chip(a.name, int64(len(a.image.Data)), 0, 0))
		}
		rows = append(rows, "attached: "+strings.Join(chips, " ")+" · /image clear drops")
	}
	return rows
}

// panelView draws the queue panel in the rows the layout gave it.
func (m *Model) panelView() string {
	lines := m.panelLines()
	out := make([]string, m.panelRows)
	for i := range out {
		if i < len(lines) {
			out[i] = m.st.queued.Render(ansi.Truncate(lines[i], m.width, "…"))
		}
	}
	return strings.Join(out, "\n")
}

// relayout makes room for the queue panel when its height changed.
func (m *Model) relayout() {
	if n := len(m.panelLines()); n != m.panelRows {
		m.keepLiveEnd(func() {
			m.panelRows = n
			m.layout()
		})
	}
}
