package session

import (
	"errors"

	"github.com/metis-agent/metis/internal/workspace"
)

// Errors the manager returns (wrapped); the HTTP API maps them to codes.
var (
	ErrNotFound     = errors.New("session not found")
	ErrTurnNotFound = errors.New("turn not found")
	ErrTurnInFlight = errors.New("another turn of this session is in flight")
	ErrInvalid      = errors.New("invalid request")
	ErrNoMessage    = errors.New("message not found")
	ErrClosed       = errors.New("server is shutting down")
	// ErrInvalidMode: a mode that is not default, accept_edits, plan or
	// auto.
	ErrInvalidMode = errors.New("invalid mode")
	// ErrApprovalNotFound: an approval id the session (and its workers)
	// never had.
	ErrApprovalNotFound = errors.New("approval not found")
	// ErrApprovalResolved: the approval was decided already (see
	// ResolvedError).
	ErrApprovalResolved = errors.New("approval already resolved")
	// ErrApprovalElsewhere: the approval waits on a turn another server
	// runs (cluster mode: the answer belongs to the tree's owner).
	ErrApprovalElsewhere = errors.New("approval waits elsewhere")
	// ErrWorkspaceForbidden: the workspace is the filesystem root, a
	// system directory or inside a pseudo-filesystem.
	ErrWorkspaceForbidden = workspace.ErrForbidden
	// ErrWorkspaceHome: the workspace is the user's home directory (or
	// holds it) and the request did not confirm it.
	ErrWorkspaceHome = workspace.ErrHome
)

// Errors of follow-ups and images (docs/conversation.md).
var (
	ErrQueueFull      = errors.New("the session's queue is full")
	ErrTurnCancelling = errors.New("the turn is being cancelled")
	ErrTurnMismatch   = errors.New("that turn is not the one running")
	ErrInvalidImage   = errors.New("invalid image")
	ErrImageNotFound  = errors.New("image not found")
)
