package protocol

import "time"

// BackgroundCommand is a command the shell tool runs in the background
// (shell with "background": true): an entry of the session summary's
// background_commands. Running commands are listed, and the ones that
// ended recently (their output can still be read with shell_output).
type BackgroundCommand struct {
	// ID is the command's id (bg_…), which shell_output and shell_kill
	// take.
	ID      string `json:"id"`
	Command string `json:"command"`
	// ToolUseID is the shell call that started it.
	ToolUseID string    `json:"tool_use_id,omitempty"`
	StartedAt time.Time `json:"started_at"`
	Running   bool      `json:"running"`
	// ExitCode is the command's exit status once it has ended; null
	// while it runs and when a signal ended it (it was stopped).
	ExitCode *int `json:"exit_code"`
	// EndReason says why it ended (BackgroundExited…); "" while it runs.
	EndReason string     `json:"end_reason,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

// Why a background command ended (end_reason, and the reason of
// tool.background_exited).
const (
	// BackgroundExited: the command ended by itself.
	BackgroundExited = "exited"
	// BackgroundKilled: shell_kill stopped it.
	BackgroundKilled = "killed"
	// BackgroundTimeout: it ran past the timeout_s it was started with.
	BackgroundTimeout = "timeout"
	// BackgroundSessionDeleted: its session was deleted (DELETE
	// /sessions/{id}, or the retention).
	BackgroundSessionDeleted = "session_deleted"
	// BackgroundServerShutdown: the server stopped.
	BackgroundServerShutdown = "server_shutdown"
	// BackgroundServerLost: the server ended without stopping it (a
	// crash, SIGKILL); the command was stopped when the server's end of
	// its lifeline closed, and the next start reports it.
	BackgroundServerLost = "server_lost"
	// BackgroundOwnerLost (cluster mode): the node that ran it lost the
	// session's tree (it died, or was cut off past its lease); the node
	// that took the tree over reports the end, and a node that loses a
	// tree stops its commands.
	BackgroundOwnerLost = "owner_lost"
	// BackgroundSupervisorKilled: the process supervising it was killed
	// (by the command itself); every process of it was stopped.
	BackgroundSupervisorKilled = "supervisor_killed"
)

// ToolBackgroundStartedPayload is the payload of
// EventToolBackgroundStarted, emitted before the tool.completed of the
// shell call that started the command.
type ToolBackgroundStartedPayload struct {
	BackgroundID string    `json:"background_id"`
	Command      string    `json:"command"`
	ToolUseID    string    `json:"tool_use_id,omitempty"`
	StartedAt    time.Time `json:"started_at"`
}

// ToolBackgroundExitedPayload is the payload of
// EventToolBackgroundExited: the command and every process it started
// are gone. It is emitted outside any turn (turn_id null) unless the
// command ended during one.
type ToolBackgroundExitedPayload struct {
	BackgroundID string `json:"background_id"`
	Command      string `json:"command"`
	// ExitCode is null when a signal ended the command.
	ExitCode   *int      `json:"exit_code"`
	Reason     string    `json:"reason"`
	StartedAt  time.Time `json:"started_at"`
	EndedAt    time.Time `json:"ended_at"`
	DurationMS int64     `json:"duration_ms"`
	// OutputBytes is how much the command printed in all; DroppedBytes
	// how much of it was never read and fell out of the output buffer.
	OutputBytes  int64 `json:"output_bytes"`
	DroppedBytes int64 `json:"dropped_bytes,omitempty"`
}
