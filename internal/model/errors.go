package model

import (
	"context"
	"errors"
	"fmt"
)

// Error classes of a failed model call (llm.call_failed error_class).
const (
	ClassAuth           = "auth"
	ClassRateLimited    = "rate_limited"
	ClassOverloaded     = "overloaded"
	ClassInvalidRequest = "invalid_request"
	ClassNetwork        = "network"
	ClassTimeout        = "timeout"
	ClassCancelled      = "cancelled"
	ClassProviderError  = "provider_error"
	ClassUnavailable    = "model_unavailable"
)

// Error is a classified model call failure.
type Error struct {
	Class     string
	Message   string // for a person: what happened and what to do
	Retryable bool
	Err       error
	// Window is, for ClassContextOverflow, the context window the
	// provider named in its refusal (0 if none).
	Window int
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Class, e.Message, e.Err)
	}
	return e.Class + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Classify returns the error class and a message for any error a call
// returned: *Error as is, context cancellation as cancelled, deadline as
// timeout, anything else as provider_error.
func Classify(err error) (class, msg string) {
	var me *Error
	switch {
	case errors.As(err, &me):
		return me.Class, me.Message
	case errors.Is(err, context.Canceled):
		return ClassCancelled, "the call was cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return ClassTimeout, "the call timed out"
	}
	return ClassProviderError, err.Error()
}
