package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/protocol"
)

// Messages the model's commands send back.
type (
	submittedMsg struct {
		acc   client.TurnAccepted
		err   error
		text  string       // the message as typed
		steer bool         // sent with "steer": true
		atts  []attachment // the images it carried
	}
	cancelSentMsg struct{ err error }
	disarmQuitMsg struct{ seq int }
)

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case frameMsg:
		m.frame(time.Now())
		return m, tea.Batch(m.nextFrame(), m.titleFetch())
	case titleMsg:
		m.titled(msg)
		return m, nil
	case tea.WindowSizeMsg:
		m.resize(msg.Width, msg.Height)
		return m, nil
	case tea.BackgroundColorMsg:
		if d := msg.IsDark(); d != m.dark {
			m.dark = d
			m.composer.SetStyles(textareaStyles(d))
			m.dirty = true
			m.render()
		}
		return m, nil
	case tea.KeyPressMsg:
		return m, m.key(msg)
	case submittedMsg:
		return m, m.submitted(msg)
	case olderMsg:
		m.older(msg)
		return m, nil
	case approvedMsg:
		m.approved(msg)
		m.dirty = true
		return m, nil
	case sessionsMsg:
		m.loaded(msg)
		return m, nil
	case modeSetMsg, compactSentMsg, createdMsg, modelsMsg, attachedMsg, unqueuedMsg,
		turnsMsg, revertedMsg, forkedMsg, rewoundMsg, mcpMsg:
		return m, m.commandResult(msg)
	case cancelSentMsg:
		if msg.err != nil {
			m.cancelling = false
			m.setFlash("cancel failed: "+msg.err.Error(), true)
		}
		return m, nil
	case disarmQuitMsg:
		if msg.seq == m.quitSeq && m.quitArmed {
			m.quitArmed = false
			m.flash = ""
		}
		return m, nil
	}
	var cmd tea.Cmd
	m.composer, cmd = m.composer.Update(msg) // paste, cursor blink…
	return m, cmd
}

// frame takes everything the feed holds, folds it in, and re-renders the
// conversation once if anything changed.
func (m *Model) frame(now time.Time) {
	m.lastFrame = now
	m.spin = int(now.UnixMilli() / spinInterval.Milliseconds())
	if m.apply(m.feed.drain()) {
		m.dirty = true
	}
	m.relayout()
	m.composer.Placeholder = composerPlaceholder
	if m.currentTurn() != "" {
		m.composer.Placeholder = busyPlaceholder
	}
	if m.dirty {
		m.render()
	}
}

// apply folds Follow's updates into the model and reports whether the
// conversation changed.
func (m *Model) apply(items []item) bool {
	changed := false
	for _, it := range items {
		switch it.kind {
		case client.Subscribed:
			if it.view != nil {
				m.view = it.view
				m.fromSummary()
				clear(m.live) // the events after the snapshot bring it again
				m.dropSteer("")
				if m.view.Turn.Status != protocol.TurnStatusInFlight {
					m.pendingTurn, m.cancelling = "", false
				}
			}
			m.subscribed, m.reconnecting, m.connErr = true, false, nil
			changed = true
		case client.EventApplied:
			if it.event == nil {
				continue
			}
			m.dequeuedNote(it.event) // before the view forgets the queued turn
			m.view.Apply(it.event)
			m.observe(it.event)
			m.pendingEnded()
			changed = true
		case client.Reconnecting:
			m.reconnecting, m.attempt, m.connErr = true, it.attempt, it.err
		case client.Resynced:
			m.setFlash("part of the stream could not be replayed; rebuilt from a fresh snapshot", false)
		case followEnded:
			m.followErr = it.err
			if errors.Is(it.err, client.ErrSessionGone) {
				m.setFlash("the session does not exist (any more)", true)
			} else if it.err != nil {
				m.setFlash("stream ended: "+it.err.Error(), true)
			}
		}
	}
	m.pendingEnded()
	if m.cancelling && m.currentTurn() == "" && !m.submitting {
		m.cancelling = false
	}
	if id := m.approval.reasonFor; id != "" && m.view.Pending[id] == nil {
		m.endReason() // decided elsewhere (another client, the timeout, a cancel)
		m.setFlash("the request was decided before your answer", false)
	}
	return changed
}

// pendingEnded forgets the turn submitted once it is seen to end: each
// event is checked, as a queued turn may start in the same frame.
func (m *Model) pendingEnded() {
	if t := m.view.Turn; m.pendingTurn != "" && t.ID == m.pendingTurn && t.Status != protocol.TurnStatusInFlight {
		m.pendingTurn, m.cancelling = "", false
	}
}

// observe keeps what the View does not: the inspector's raw events, the
// per-message delta counts (a running token estimate), the model of the
// latest call, the order workers appeared in and llm.call_failed errors
// tied to their message.
func (m *Model) observe(ev *protocol.EventEnvelope) {
	m.events.add(ev)
	m.observeMore(ev)
	m.observeLive(ev)
	m.observeNotes(ev)
	m.followUpSeen(ev)
	var p struct {
		MessageID  string `json:"message_id"`
		Model      string `json:"model"`
		ErrorClass string `json:"error_class"`
		Message    string `json:"message"`
		WorkerID   string `json:"worker_session_id"`
	}
	switch protocol.EventType(ev.Type) {
	case protocol.EventTextDelta, protocol.EventThinkingDelta, protocol.EventToolUseInputDelta:
		_ = json.Unmarshal(ev.Payload, &p)
		m.deltas[p.MessageID]++
	case protocol.EventRouteDecided, protocol.EventLLMCallStarted, protocol.EventMessageStart:
		if json.Unmarshal(ev.Payload, &p) == nil && p.Model != "" {
			m.modelName = p.Model
		}
	case protocol.EventLLMCallFailed:
		_ = json.Unmarshal(ev.Payload, &p)
		if p.ErrorClass != "cancelled" {
			turn := ""
			if ev.TurnID != nil {
				turn = *ev.TurnID
			}
			m.callErrors = append(m.callErrors, callError{turnID: turn, messageID: p.MessageID,
				text: fmt.Sprintf("model error (%s): %s", p.ErrorClass, p.Message)})
		}
	case protocol.EventDelegateStarted:
		_ = json.Unmarshal(ev.Payload, &p)
		for _, id := range m.workerOrder {
			if id == p.WorkerID {
				return
			}
		}
		m.workerOrder = append(m.workerOrder, p.WorkerID)
	}
}

func (m *Model) setFlash(s string, isErr bool) {
	m.flash, m.flashIsError = s, isErr
}

// resize lays the screen out again and re-renders.
func (m *Model) resize(w, h int) {
	if w != m.width {
		m.md.reset()
	}
	m.keepLiveEnd(func() {
		m.width, m.height = w, h
		m.layout()
		m.dirty = true
		m.render()
	})
}

// render rebuilds the conversation into the viewport, keeping the view
// pinned to the bottom unless the user scrolled up.
func (m *Model) render() {
	m.dirty = false
	if m.width <= 0 {
		return
	}
	atBottom := m.vp.AtBottom()
	m.vp.SetContent(m.renderConversation())
	if atBottom {
		m.vp.GotoBottom()
	}
	m.renders++
}
