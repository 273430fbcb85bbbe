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
	// ErrWorkspaceForbidden: the workspace is the filesystem root, a
	// system directory or inside a pseudo-filesystem.
	ErrWorkspaceForbidden = workspace.ErrForbidden
	// ErrWorkspaceHome: the workspace is the user's home directory (or
	// holds it) and the request did not confirm it.
	ErrWorkspaceHome = workspace.ErrHome
)
