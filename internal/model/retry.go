package model

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// RetryPolicy retries a model call that failed before its first delta.
// Once a delta has reached the client, a retry would show it twice, so
// failures after that point are final.
type RetryPolicy struct {
	Attempts int           // total attempts, including the first (default 3)
	Base     time.Duration // first backoff (default 500ms)
	Max      time.Duration // longest backoff (default 8s)
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts <= 0 {
		p.Attempts = 3
	}
	if p.Base <= 0 {
		p.Base = 500 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 8 * time.Second
	}
	return p
}

// Backoff returns the wait before attempt n (1-based retries): full
// jitter over an exponential bound, at least hint if the provider gave a
// Retry-After.
func (p RetryPolicy) Backoff(n int, hint time.Duration) time.Duration {
	p = p.withDefaults()
	bound := p.Base << min(n-1, 16)
	if bound > p.Max || bound <= 0 {
		bound = p.Max
	}
	d := time.Duration(rand.Int64N(int64(bound)/2+1)) + bound/2
	return max(d, min(hint, p.Max))
}

// RetryAfter is implemented by errors that carry a provider's
// Retry-After hint.
type RetryAfter interface{ RetryAfter() time.Duration }

// Do runs call until it succeeds, fails after emitting a delta, fails
// with a non-retryable error, or runs out of attempts. call reports
// whether it emitted any delta. Cancelling ctx stops the waits.
func (p RetryPolicy) Do(ctx context.Context, call func(attempt int) (emitted bool, err error)) error {
	p = p.withDefaults()
	for attempt := 1; ; attempt++ {
		emitted, err := call(attempt)
		if err == nil || emitted || attempt >= p.Attempts || ctx.Err() != nil {
			return err
		}
		var me *Error
		if !errors.As(err, &me) || !me.Retryable {
			return err
		}
		var hint time.Duration
		var ra RetryAfter
		if errors.As(err, &ra) {
			hint = ra.RetryAfter()
		}
		t := time.NewTimer(p.Backoff(attempt, hint))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
