package session

import "errors"

// Errors the manager returns (wrapped); the HTTP API maps them to codes.
var (
	ErrNotFound     = errors.New("session not found")
	ErrTurnNotFound = errors.New("turn not found")
	ErrTurnInFlight = errors.New("another turn of this session is in flight")
	ErrInvalid      = errors.New("invalid request")
	ErrNoMessage    = errors.New("message not found")
	ErrClosed       = errors.New("server is shutting down")
)
