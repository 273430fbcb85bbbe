package protocol

import "time"

// Checkpoints, revert and fork (contract §11; docs/conversation.md,
// "Checkpoints and revert" and "Fork").

// Catalog events of workspace checkpoints.
const (
	// EventWorkspaceCheckpointed: a turn is about to run its first tool
	// that may change the workspace, and the files were saved first.
	EventWorkspaceCheckpointed EventType = "workspace.checkpointed"
	// EventWorkspaceCheckpointFailed: the files could not be saved (git
	// missing, an error): the turn goes on, and cannot be reverted.
	EventWorkspaceCheckpointFailed EventType = "workspace.checkpoint_failed"
	// EventWorkspaceChanged: a turn that saved a checkpoint ended; the
	// payload lists the files it changed. Emitted before the turn's
	// terminal event.
	EventWorkspaceChanged EventType = "workspace.changed"
	// EventWorkspaceReverted: a revert (or its undo, or a fork with
	// checkpoint) put the workspace's files back (contract §11).
	EventWorkspaceReverted EventType = "workspace.reverted"
)

// Error codes of the checkpoint and fork endpoints.
const (
	// CodeNothingToRevert (409): the turn took no checkpoint (it ran no
	// tool that could change files), or the files already are as the
	// checkpoint holds them.
	CodeNothingToRevert = "nothing_to_revert"
	// CodeCheckpointsUnavailable (409): checkpoints are off on this
	// server (turned off, or git is missing); the message says why.
	CodeCheckpointsUnavailable = "checkpoints_unavailable"
	// CodeCheckpointNotFound (404): no checkpoint of that id belongs to
	// the session (or it was collected).
	CodeCheckpointNotFound = "checkpoint_not_found"
	// CodeCheckpointFailed (500): the files as they are could not be
	// saved before a revert, so nothing was changed.
	CodeCheckpointFailed = "checkpoint_failed"
)

// Error classes of workspace.checkpoint_failed.
const (
	// ClassCheckpointsUnavailable: git is missing or unusable here.
	ClassCheckpointsUnavailable = "checkpoints_unavailable"
	// ClassCheckpointError: taking this checkpoint failed.
	ClassCheckpointError = "checkpoint_error"
)

// Triggers of workspace.reverted.
const (
	RevertTurn = "revert" // POST /sessions/{id}/turns/{turn_id}/revert
	RevertUndo = "undo"   // POST /sessions/{id}/checkpoints/{checkpoint_id}/restore
	RevertFork = "fork"   // POST /sessions/{id}/fork with checkpoint
)

// RevertWarning is the warning of every revert: clients show it where
// the user clicks.
const RevertWarning = "Only the workspace's files are put back. What commands did besides changing those files " +
	"(packages installed, databases or services changed, files outside the workspace, ignored files or files over " +
	"the size limit) is not undone."

// Reasons a path is left out of a checkpoint or left alone by a revert
// (CheckpointSkip.Reason).
const (
	SkipTooLarge         = "too_large"         // a file over the size limit
	SkipTooManyFiles     = "too_many_files"    // a directory past the cap on new files per checkpoint
	SkipNestedRepository = "nested_repository" // a directory holding a git repository of its own
	SkipNotAFile         = "not_a_file"        // a FIFO, socket or device
	SkipCollapsed        = "collapsed"         // a directory holding more left-out paths than are listed
	SkipIgnored          = "ignored"           // a file the checkpoint's ignore rules ignore (reverts only)
)

// File change statuses (FileChange.Status).
const (
	FileAdded       = "added"
	FileModified    = "modified"
	FileDeleted     = "deleted"
	FileTypeChanged = "type_changed"
)

// CheckpointSkip is a path a checkpoint left out, or a revert left
// alone; Path is relative to the workspace ("." for all of it).
type CheckpointSkip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Bytes  int64  `json:"bytes,omitempty"`
	Files  int    `json:"files,omitempty"`
}

// WorkspaceCheckpointedPayload is the payload of
// EventWorkspaceCheckpointed.
type WorkspaceCheckpointedPayload struct {
	CheckpointID string `json:"checkpoint_id"`
	// ToolUseID is the call the checkpoint was taken for.
	ToolUseID string `json:"tool_use_id,omitempty"`
	// Staged counts the files that differed from the workspace's
	// previous checkpoint (0: nothing changed since).
	Staged     int              `json:"staged"`
	Skipped    []CheckpointSkip `json:"skipped,omitempty"`
	DurationMS int64            `json:"duration_ms"`
}

// WorkspaceCheckpointFailedPayload is the payload of
// EventWorkspaceCheckpointFailed.
type WorkspaceCheckpointFailedPayload struct {
	ErrorClass string `json:"error_class"`
	Message    string `json:"message"`
	// After is true when the checkpoint after the turn failed (the turn
	// can be reverted, its changes are not listed).
	After bool `json:"after,omitempty"`
}

// FileChange is one file a turn changed.
type FileChange struct {
	Path   string `json:"path"`
	Status string `json:"status"`
	// OldMode and NewMode are git's modes: "100644", "100755"
	// (executable), "120000" (symlink); absent where the file is.
	OldMode   string `json:"old_mode,omitempty"`
	NewMode   string `json:"new_mode,omitempty"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary,omitempty"`
}

// MaxListedChanges bounds the files a turn's changes list.
const MaxListedChanges = 200

// TurnChanges is what a turn changed in the workspace's files.
type TurnChanges struct {
	// Files lists at most MaxListedChanges files, in path order.
	Files          []FileChange `json:"files"`
	FilesChanged   int          `json:"files_changed"`
	FilesTruncated bool         `json:"files_truncated,omitempty"`
	Additions      int          `json:"additions"`
	Deletions      int          `json:"deletions"`
}

// WorkspaceChangedPayload is the payload of EventWorkspaceChanged.
type WorkspaceChangedPayload struct {
	CheckpointID      string `json:"checkpoint_id"`
	AfterCheckpointID string `json:"after_checkpoint_id"`
	TurnChanges
}

// PathError is a path a revert could not put back.
type PathError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// MaxListedPaths bounds each path list of a revert.
const MaxListedPaths = 1000

// RevertResult is the answer of a revert and the payload of
// EventWorkspaceReverted.
type RevertResult struct {
	// Trigger is RevertTurn, RevertUndo or RevertFork.
	Trigger string `json:"trigger"`
	// TurnID is the reverted turn (trigger revert), absent otherwise.
	TurnID string `json:"turn_id,omitempty"`
	// CheckpointID is the checkpoint the files were put back to.
	CheckpointID string `json:"checkpoint_id"`
	// UndoCheckpointID holds the files as they were just before:
	// POST /sessions/{id}/checkpoints/{undo_checkpoint_id}/restore
	// undoes the revert.
	UndoCheckpointID string `json:"undo_checkpoint_id"`
	// Restored lists the files written back, Removed the files deleted
	// (created since the checkpoint), LeftAlone what exists and was not
	// touched (ignored, over the size limit, never captured), Failed
	// what could not be put back. Each list holds at most MaxListedPaths
	// entries; Truncated says one was cut.
	Restored  []string         `json:"restored"`
	Removed   []string         `json:"removed"`
	LeftAlone []CheckpointSkip `json:"left_alone,omitempty"`
	Failed    []PathError      `json:"failed,omitempty"`
	Truncated bool             `json:"truncated,omitempty"`
	// Warning is RevertWarning: show it to the user.
	Warning    string `json:"warning"`
	DurationMS int64  `json:"duration_ms"`
}

// CheckpointStatus says whether the server takes checkpoints.
type CheckpointStatus struct {
	Enabled bool `json:"enabled"`
	// Reason says why not ("" when enabled).
	Reason string `json:"reason,omitempty"`
}

// TurnInfo is one turn of GET /sessions/{id}/turns.
type TurnInfo struct {
	TurnID    string     `json:"turn_id"`
	Status    string     `json:"status"` // in_flight, completed, cancelled, failed
	Reason    string     `json:"reason,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	// UserMessageID and Prompt are the turn's user message and its text
	// (cut at 200 runes).
	UserMessageID string `json:"user_message_id,omitempty"`
	Prompt        string `json:"prompt"`
	// CheckpointID is the checkpoint taken before the turn first changed
	// the workspace (null: it ran no tool that could, or checkpoints
	// were unavailable). AfterCheckpointID is the one taken when it
	// ended (null while it runs, or when it did not end normally).
	CheckpointID      *string `json:"checkpoint_id"`
	AfterCheckpointID *string `json:"after_checkpoint_id"`
	// Changes is what the turn changed (null without both checkpoints).
	Changes *TurnChanges `json:"changes"`
	// Revertible: POST .../turns/{turn_id}/revert can put the files back
	// as they were before this turn (it has a checkpoint and no turn of
	// the session is in flight).
	Revertible bool `json:"revertible"`
}

// TurnList is the answer of GET /sessions/{id}/turns: turns oldest
// first, and, when HasMore, the cursor of the next (older) page.
type TurnList struct {
	Turns       []TurnInfo       `json:"turns"`
	HasMore     bool             `json:"has_more"`
	Next        string           `json:"next,omitempty"`
	Checkpoints CheckpointStatus `json:"checkpoints"`
}

// FileDiff is one file of a turn's diff.
type FileDiff struct {
	FileChange
	Diff          string `json:"diff"`
	DiffTruncated bool   `json:"diff_truncated,omitempty"`
}

// TurnDiff is the answer of GET /sessions/{id}/turns/{turn_id}/changes.
type TurnDiff struct {
	TurnID            string     `json:"turn_id"`
	CheckpointID      string     `json:"checkpoint_id"`
	AfterCheckpointID string     `json:"after_checkpoint_id"`
	Files             []FileDiff `json:"files"`
}

// ForkRequest is the body of POST /sessions/{id}/fork.
type ForkRequest struct {
	// MessageID is the last message the fork holds ("": all of them).
	MessageID string `json:"message_id,omitempty"`
	// Checkpoint also puts the workspace's files back as they were at
	// that message (off by default: the workspace is shared with the
	// session forked).
	Checkpoint bool `json:"checkpoint,omitempty"`
	// Mode is the fork's permission mode ("": the server's default, as
	// for a new session; the source's mode is not carried over).
	Mode string `json:"mode,omitempty"`
}

// ForkedFrom is where a fork came from (the summary's forked_from).
type ForkedFrom struct {
	SessionID string `json:"session_id"`
	MessageID string `json:"message_id"`
}

// ForkResult is the answer of POST /sessions/{id}/fork: the new
// session's summary, and what the restore did when the fork asked for
// the checkpoint.
type ForkResult struct {
	SessionSummary
	Restored *RevertResult `json:"restored,omitempty"`
	// RestoreError says why the files were not put back although the
	// fork asked for its checkpoint (the fork was made all the same).
	RestoreError string `json:"restore_error,omitempty"`
}
