// Package tui is the terminal UI of metis: `metis` with no arguments and
// `metis chat`. It is chat-first: the conversation fills the screen, a
// composer is always available below it, a one-line activity bar shows
// the turn in flight (model, tool, tokens, cost, or "reconnecting…"), and
// an on-demand inspector lists the raw recent events.
//
// It owns the Bubble Tea program and everything it renders: the model
// (model.go), its update loop (update.go, keys.go), the frame pacing that
// batches a fast stream into one render per frame (feed.go), the
// conversation rendering (render.go, markdown.go, diff.go, result.go: a
// finished tool call's result, a shell command's output without the
// result's labels), everything from the stream made printable so that
// no escape sequence in it drives the terminal, paging in
// messages older than the snapshot's (history.go), the screen layout
// (view.go, inspector.go), the help and key hints (help.go), the slash
// commands it handles itself (commands.go), the session picker
// (picker.go), the model picker (models.go), the sheets over the
// conversation (sheet.go), the approval prompt (approval.go), follow-ups
// (followup.go: enter queues while a turn runs, ctrl+s steers, /image,
// the queue panel), /undo, /redo and /fork (undo.go), /rewind
// (rewind.go: fork before an earlier prompt and edit it), the MCP servers'
// mark and the background commands (servers.go), the lines events make
// between the messages (notes.go) and what it keeps from the events
// beyond the client's View: diffs, turn totals, the context
// gauge, compactions (stats.go), the title asked of the server
// (title.go) and a running command's live output (liveoutput.go). Run
// (run.go) finds the
// server as contract §1 says, has the command start one in-process
// (Options.StartServer) when the default address is not answering, and
// creates or resumes a session (--session, --continue); /new and the
// picker end the screen with the next session to open. docs/tui.md is
// the user's guide.
//
// tui imports the public client and protocol packages, token, and cli
// (for Env and the server URL, which the client commands share); it
// never imports the server or its configuration. It renders with the
// charm.land v2 libraries (bubbletea, bubbles, lipgloss), and markdown
// with goldmark's parser and a renderer of its own (markdown*.go).
package tui
