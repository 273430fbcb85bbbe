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

// Errors of follow-ups and images (docs/conversation.md).
var (
	ErrQueueFull      = errors.New("the session's queue is full")
	ErrTurnCancelling = errors.New("the turn is being cancelled")
	ErrTurnMismatch   = errors.New("that turn is not the one running")
	ErrInvalidImage   = errors.New("invalid image")
	ErrImageNotFound  = errors.New("image not found")
)
