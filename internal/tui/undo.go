package tui

import (
	"fmt"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/metis-agent/metis/client"
	"github.com/metis-agent/metis/internal/cli"
	"github.com/metis-agent/metis/protocol"
)

// Undo, redo and fork (docs/conversation.md): /undo puts the files back
// as they were before the last turn that changed them, once the user
// has seen what it puts back and that commands' other effects stay;
// /redo undoes that revert; /fork copies the session and opens the copy.

// undoPage is how many of the newest turns /undo looks through.
const undoPage = 50

// Messages of the undo calls.
type (
	turnsMsg struct {
		list client.TurnList
		err  error
	}
	revertedMsg struct {
		res  client.RevertResult
		redo bool
		err  error
	}
	forkedMsg struct {
		res client.ForkResult
		err error
	}
)

// undo looks for the last turn that changed files.
func (m *Model) undo() tea.Cmd {
	if m.busy() {
		m.setFlash("a turn is running: /undo once it ends (or esc to cancel it)", true)
		return nil
	}
	m.setFlash("looking for the last turn that changed files…", false)
	ctx, api, sid := m.ctx, m.api, m.sessionID
	return func() tea.Msg {
		l, err := api.Turns(ctx, sid, "", undoPage)
		return turnsMsg{list: l, err: err}
	}
}

// lastChange is the newest turn of the list that can be reverted and
// changed files (or whose changes are unknown), or nil.
func lastChange(l client.TurnList) *client.TurnInfo {
	for i := len(l.Turns) - 1; i >= 0; i-- {
		t := &l.Turns[i]
		if t.CheckpointID == nil || !t.Revertible {
			continue
		}
		if t.Changes != nil && t.Changes.FilesChanged == 0 {
			continue
		}
		return t
	}
	return nil
}

// askUndo shows what reverting the turn puts back and asks first.
func (m *Model) askUndo(msg turnsMsg) {
	m.flash = ""
	if msg.err != nil {
		m.setFlash("cannot list the turns: "+errText(msg.err), true)
		return
	}
	if !msg.list.Checkpoints.Enabled {
		why := "nothing to revert: this server takes no checkpoints"
		if r := msg.list.Checkpoints.Reason; r != "" {
			why += " (" + r + ")"
		}
		m.setFlash(why, true)
		return
	}
	t := lastChange(msg.list)
	if t == nil {
		m.setFlash("nothing to revert: no turn of this session changed files", false)
		return
	}
	lines := []string{
		fmt.Sprintf("Put the workspace's files back as they were before the turn “%s” (%s, %s)?", titleOf(t.Prompt), t.TurnID, cli.Ago(time.Now(), t.StartedAt)),
	}
	if c := t.Changes; c != nil {
		lines = append(lines, fmt.Sprintf("It changed %s (+%d −%d); the changes of later turns are undone too:", plural(c.FilesChanged, "file"), c.Additions, c.Deletions))
		for _, f := range c.Files {
			lines = append(lines, fmt.Sprintf("  %s %s (+%d −%d)", changeMark(f.Status), f.Path, f.Additions, f.Deletions))
		}
		if c.FilesTruncated {
			lines = append(lines, "  … and more")
		}
	} else {
		lines = append(lines, "Its changes are not listed (the checkpoint after it is missing); every file it or a later turn changed goes back.")
	}
	lines = append(lines, "", m.st.warn.Render("⚠ "+protocol.RevertWarning), "", "/redo puts the files back as they are now.")
	turn := t.TurnID
	m.openSheet(sheet{kind: "undo", title: "undo", hint: "y or enter reverts · n or esc keeps the files", lines: lines,
		confirm: func() tea.Cmd { return m.revert(turn) }})
}

// changeMark is a file change's status in one letter, as git shows it.
func changeMark(status string) string {
	switch status {
	case protocol.FileAdded:
		return "A"
	case protocol.FileDeleted:
		return "D"
	case protocol.FileTypeChanged:
		return "T"
	}
	return "M"
}

// revert asks the server to revert a turn.
func (m *Model) revert(turn string) tea.Cmd {
	ctx, api, sid := m.ctx, m.api, m.sessionID
	m.setFlash("reverting…", false)
	return func() tea.Msg {
		res, err := api.Revert(ctx, sid, turn)
		return revertedMsg{res: res, err: err}
	}
}

// redo undoes the latest revert seen.
func (m *Model) redo() tea.Cmd {
	if m.undoCP == "" {
		m.setFlash("nothing to redo: no revert was seen here", false)
		return nil
	}
	if m.busy() {
		m.setFlash("a turn is running: /redo once it ends", true)
		return nil
	}
	ctx, api, sid, cp := m.ctx, m.api, m.sessionID, m.undoCP
	return func() tea.Msg {
		res, err := api.RestoreCheckpoint(ctx, sid, cp)
		return revertedMsg{res: res, redo: true, err: err}
	}
}

// reverted reports a revert's answer (its workspace.reverted event
// shows what it did in the conversation).
func (m *Model) reverted(msg revertedMsg) {
	switch {
	case client.IsNothingToRevert(msg.err):
		m.setFlash("nothing to revert: the files already are as they were before that turn", false)
	case msg.err != nil:
		m.setFlash("not reverted: "+errText(msg.err), true)
	case msg.redo:
		m.undoCP = ""
		m.setFlash(fmt.Sprintf("revert undone: %d restored, %d removed", len(msg.res.Restored), len(msg.res.Removed)), false)
	default:
		m.undoCP = msg.res.UndoCheckpointID
		m.setFlash(fmt.Sprintf("reverted: %d restored, %d removed · /redo undoes it", len(msg.res.Restored), len(msg.res.Removed)), false)
	}
}

// fork copies the session as it is and opens the copy.
func (m *Model) fork() tea.Cmd {
	if m.busy() {
		m.setFlash("a turn is running: /fork once it ends", true)
		return nil
	}
	m.setFlash("forking…", false)
	ctx, api, sid := m.ctx, m.api, m.sessionID
	return func() tea.Msg {
		res, err := api.Fork(ctx, sid, client.ForkRequest{})
		return forkedMsg{res: res, err: err}
	}
}
