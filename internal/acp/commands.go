package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/metis-agent/metis/protocol"
)

// metis's own slash commands, offered to the editor with
// available_commands_update and run by the agent: they never reach the
// model. A prompt that starts with another "/word" is sent as it is
// (builtin:demo's /echo, /long and /tool, a per-turn "/model X text").

// command is one slash command.
type command struct {
	name, description, hint string
}

var commands = []command{
	{"compact", "Compact the conversation now: summarise the older part, keep the recent turns", "what the summary must keep (optional)"},
	{"mode", "Show or change the permission mode: default, accept_edits, plan or auto", "default | accept_edits | plan | auto"},
	{"model", "Show or change the model of the next turns", "provider:model"},
	{"help", "List metis's commands", ""},
}

// availableCommands is the list sent in available_commands_update.
func availableCommands() []sdk.AvailableCommand {
	out := make([]sdk.AvailableCommand, 0, len(commands))
	for _, c := range commands {
		ac := sdk.AvailableCommand{Name: c.name, Description: c.description}
		if c.hint != "" {
			ac.Input = &sdk.AvailableCommandInput{Unstructured: &sdk.UnstructuredCommandInput{Hint: c.hint}}
		}
		out = append(out, ac)
	}
	return out
}

// commandsDelay is how long after answering session/new the agent sends
// the session's commands: the editor learns the session id from the
// answer, so the update must come after it.
const commandsDelay = 50 * time.Millisecond

// announceCommands sends the session's available commands, after the
// answer that names the session (session/new) when later is set.
func (a *Agent) announceCommands(sid string, later bool) {
	if a.conn == nil {
		return
	}
	send := func() {
		ctx, cancel := context.WithTimeout(a.ctx, httpTimeout)
		defer cancel()
		if err := a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: sdk.SessionId(sid),
			Update: sdk.SessionUpdate{AvailableCommandsUpdate: &sdk.SessionAvailableCommandsUpdate{AvailableCommands: availableCommands()}}}); err != nil {
			a.log.Debug("send the available commands", "session", sid, "err", err)
		}
	}
	if !later {
		send()
		return
	}
	if !a.enter() {
		return
	}
	go func() {
		defer a.inflight.Done()
		select {
		case <-time.After(commandsDelay):
			send()
		case <-a.ctx.Done():
		}
	}()
}

// parseCommand splits a prompt into one of metis's commands and its
// argument; ok is false for any other text. "/model X" with more text
// after the model is the server's per-turn override, not the command.
func parseCommand(text string) (name, arg string, ok bool) {
	text = strings.TrimSpace(text)
	rest, found := strings.CutPrefix(text, "/")
	if !found {
		return "", "", false
	}
	name = rest
	if i := strings.IndexFunc(rest, unicode.IsSpace); i >= 0 {
		name, arg = rest[:i], strings.TrimSpace(rest[i:])
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		if name == "model" && len(strings.Fields(arg)) > 1 {
			return "", "", false
		}
		return name, arg, true
	}
	return "", "", false
}

// runCommand runs one of metis's commands for a prompt and answers it.
// /compact is followed like a turn (its events as updates, cancellable);
// the others answer at once with a line of text.
func (a *Agent) runCommand(ctx context.Context, sid, name, arg string) (sdk.PromptResponse, error) {
	reply := func(text string) (sdk.PromptResponse, error) {
		if err := a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: sdk.SessionId(sid), Update: sdk.UpdateAgentMessageText(text)}); err != nil {
			return sdk.PromptResponse{}, sdk.NewInternalError(map[string]any{"error": "sending an update: " + err.Error()})
		}
		return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn, Meta: map[string]any{"metis": map[string]any{"command": name}}}, nil
	}
	switch name {
	case "help":
		var b strings.Builder
		b.WriteString("metis commands (run by metis, not sent to the model):\n")
		for _, c := range commands {
			fmt.Fprintf(&b, "- `/%s`", c.name)
			if c.hint != "" {
				fmt.Fprintf(&b, " *%s*", c.hint)
			}
			fmt.Fprintf(&b, ": %s\n", c.description)
		}
		b.WriteString("Any other text starting with `/` goes to the model as it is.")
		return reply(b.String())
	case "mode":
		if arg == "" {
			s, err := a.session(ctx, sid)
			if err != nil {
				return sdk.PromptResponse{}, err
			}
			return reply("Mode: " + s.Mode + " (default, accept_edits, plan or auto).")
		}
		// current_mode_update comes from the session's standing
		// follower, as for a change made anywhere else (watch.go).
		s, err := a.setMode(ctx, sid, arg)
		if err != nil {
			return sdk.PromptResponse{}, err
		}
		return reply("Mode: " + s.Mode + ".")
	case "model":
		if arg == "" {
			s, err := a.session(ctx, sid)
			if err != nil {
				return sdk.PromptResponse{}, err
			}
			m := a.ui.chosenModel(sid)
			if m == "" {
				m = s.ActiveModel
			}
			return reply("Model: " + m + ". Available: " + strings.Join(a.modelChoices(s, m).ids, ", ") + ".")
		}
		if _, err := a.setModel(ctx, sid, arg); err != nil {
			return sdk.PromptResponse{}, err
		}
		return reply("Model: " + arg + " (from the next turn on).")
	case "compact":
		return a.compact(ctx, sid, arg)
	}
	return sdk.PromptResponse{}, sdk.NewInternalError(map[string]any{"error": "unknown command " + name})
}

// compact runs /compact: it asks the server to compact the session now
// and follows the compaction as a turn, sending a line when it starts
// and one when it ends, and a usage_update with the conversation's new
// size. A session/cancel cancels it. A compaction that cannot make
// progress is not an error: the prompt answers end_turn, saying so.
func (a *Agent) compact(ctx context.Context, sid, instructions string) (sdk.PromptResponse, error) {
	sess, err := a.session(ctx, sid)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	t := newTurn(a, sid, sess.WorkspacePath, "")
	t.compaction = &compaction{instructions: instructions, window: int(sess.ContextWindow)}
	return a.runTurn(ctx, t)
}

// compaction is what a /compact turn tracks.
type compaction struct {
	instructions string
	window       int
}

// submitCompaction starts the compaction on the server; its id stands
// for the turn's (cancelling it cancels the compaction).
func (t *turn) submitCompaction(ctx context.Context) (string, error) {
	return t.a.c.Compact(ctx, t.sid, t.compaction.instructions)
}

// compactionEvent maps the compaction's events: context.compacting and
// context.compacted as text, context.compaction_failed as text and the
// answer.
func (t *turn) compactionEvent(ctx context.Context, ev *protocol.EventEnvelope) {
	var p struct {
		CompactionID string          `json:"compaction_id"`
		TokensBefore int             `json:"tokens_before"`
		TokensAfter  int             `json:"tokens_after"`
		Method       string          `json:"method"`
		ErrorClass   string          `json:"error_class"`
		Message      json.RawMessage `json:"message"`
	}
	if json.Unmarshal(ev.Payload, &p) != nil || p.CompactionID == "" || p.CompactionID != t.id {
		return
	}
	var msg string // context.compaction_failed's (context.compacted's message is the compaction message)
	_ = json.Unmarshal(p.Message, &msg)
	meta := map[string]any{"metis": map[string]any{"command": "compact", "compaction_id": t.id}}
	switch protocol.EventType(ev.Type) {
	case protocol.EventContextCompacting:
		t.send(ctx, sdk.UpdateAgentMessageText("Compacting the conversation ("+tokens(p.TokensBefore)+")…\n"))
	case protocol.EventContextCompacted:
		t.send(ctx, sdk.UpdateAgentMessageText(fmt.Sprintf("Compacted (%s): %s → %s.", p.Method, tokens(p.TokensBefore), tokens(p.TokensAfter))))
		t.send(ctx, sdk.SessionUpdate{UsageUpdate: &sdk.SessionUsageUpdate{Used: p.TokensAfter, Size: t.compaction.window}})
		defer t.stop()
		t.result = &sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn, Meta: meta}
	case protocol.EventContextCompactionFailed:
		defer t.stop()
		if p.ErrorClass == "cancelled" {
			t.result = &sdk.PromptResponse{StopReason: sdk.StopReasonCancelled, Meta: meta}
			return
		}
		t.send(ctx, sdk.UpdateAgentMessageText("Nothing compacted: "+msg))
		t.result = &sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn, Meta: meta}
	}
}

// tokens formats a token count.
func tokens(n int) string {
	switch {
	case n >= 10_000:
		return strconv.Itoa((n+500)/1000) + "k tokens"
	case n == 1:
		return "1 token"
	}
	return strconv.Itoa(n) + " tokens"
}
