package feed

import (
	"context"
	"sync"
)

// A Hold keeps alive, for as long as a stream runs, what was set up for
// it before its transport took over: a cluster node's follow of a tree
// another node owns (internal/api adds it in front of the stream's
// handler). A transport whose connection outlives its HTTP handler (a
// hijacked WebSocket, run on a goroutine of its own) takes the request's
// hold and releases it when the connection ends; whoever made the hold
// releases it when the handler returns unless it was taken.
type Hold struct {
	mu       sync.Mutex
	release  []func()
	taken    bool
	released bool
}

type holdKey struct{}

// WithHold returns ctx carrying a new hold, and the hold.
func WithHold(ctx context.Context) (context.Context, *Hold) {
	h := &Hold{}
	return context.WithValue(ctx, holdKey{}, h), h
}

// Add has the hold run fn when it is released (in the reverse order of
// Add).
func (h *Hold) Add(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.release = append(h.release, fn)
}

// TakeHold takes the hold ctx carries, if any, for the caller to
// release when its stream ends; nil (whose Release does nothing) when
// ctx carries none.
func TakeHold(ctx context.Context) *Hold {
	h, _ := ctx.Value(holdKey{}).(*Hold)
	if h != nil {
		h.mu.Lock()
		h.taken = true
		h.mu.Unlock()
	}
	return h
}

// Release runs what was added, once. A nil hold does nothing.
func (h *Hold) Release() {
	if h == nil {
		return
	}
	h.mu.Lock()
	fns := h.release
	done := h.released
	h.released, h.release = true, nil
	h.mu.Unlock()
	if done {
		return
	}
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// ReleaseUnlessTaken releases the hold unless a transport took it.
func (h *Hold) ReleaseUnlessTaken() {
	h.mu.Lock()
	taken := h.taken
	h.mu.Unlock()
	if !taken {
		h.Release()
	}
}
