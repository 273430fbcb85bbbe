package model

import (
	"io"
	"sync"
	"time"
)

// IdleReader wraps a streaming response body: if no byte arrives for
// timeout, onIdle is called once (adapters cancel the request there, so
// the read fails at once and the call ends with class timeout). Provider
// keep-alive pings count as bytes, which is why this sits below the SDK's
// event parser.
type IdleReader struct {
	r       io.ReadCloser
	timeout time.Duration
	timer   *time.Timer
	mu      sync.Mutex
	fired   bool
}

// NewIdleReader arms the idle timer; Close stops it.
func NewIdleReader(r io.ReadCloser, timeout time.Duration, onIdle func()) *IdleReader {
	ir := &IdleReader{r: r, timeout: timeout}
	ir.timer = time.AfterFunc(timeout, func() {
		ir.mu.Lock()
		ir.fired = true
		ir.mu.Unlock()
		onIdle()
	})
	return ir
}

// Read implements io.Reader, re-arming the timer whenever bytes arrive.
func (ir *IdleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.timer.Reset(ir.timeout)
	}
	return n, err
}

// Close implements io.Closer.
func (ir *IdleReader) Close() error {
	ir.timer.Stop()
	return ir.r.Close()
}

// Fired reports whether the idle timeout fired.
func (ir *IdleReader) Fired() bool {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	return ir.fired
}
