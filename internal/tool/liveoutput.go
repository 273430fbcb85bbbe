package tool

import (
	"context"
	"sync"
	"time"
	"unicode/utf8"
)

// Live output: what a running shell call prints, streamed as it comes
// (the tool.output_delta events, docs/tool-dispatcher.md "Live
// output"). The call's result is built as before; this is a view of it
// for the clients, coalesced and bounded so that a chatty command
// cannot flood the session's streaming ring.
const (
	// LiveOutputInterval is the longest output waits before it is sent.
	LiveOutputInterval = 50 * time.Millisecond
	// LiveOutputChunk is the most one delta carries; output that fills
	// it is sent at once.
	LiveOutputChunk = 8 << 10
	// MaxLiveOutput caps the bytes streamed for one call, both streams
	// together; past it the call's last delta says Capped.
	MaxLiveOutput = 1 << 20
	// MaxLiveOutputDeltas caps the deltas of one call (a command that
	// prints a line every few milliseconds for an hour).
	MaxLiveOutputDeltas = 2048
)

// OutputChunk is one delta of a call's live output.
type OutputChunk struct {
	Stream string // protocol.OutputStdout or protocol.OutputStderr
	Data   string // valid UTF-8
	Offset int64  // bytes of Data the call's earlier chunks carried
	Capped bool   // the last chunk: the cap was reached, Data is empty
}

// liveLimits are the coalescing and the caps of a liveOutput.
type liveLimits struct {
	interval time.Duration
	chunk    int
	maxBytes int64
	maxCount int
}

var defaultLiveLimits = liveLimits{interval: LiveOutputInterval, chunk: LiveOutputChunk,
	maxBytes: MaxLiveOutput, maxCount: MaxLiveOutputDeltas}

// liveOutput coalesces a call's output into chunks for emit: a chunk
// goes out when LiveOutputChunk bytes of one stream are waiting, when
// the other stream writes (so that the order of stdout and stderr is
// kept), or LiveOutputInterval after its first byte came. emit is never
// called concurrently, nor after close returns.
type liveOutput struct {
	emit func(OutputChunk)
	lim  liveLimits

	mu      sync.Mutex
	stream  string // of pending
	pending []byte
	offset  int64
	count   int
	capped  bool
	kick    chan struct{} // a byte is waiting and no flush is scheduled
	emitMu  sync.Mutex    // orders emit calls

	stop context.CancelFunc
	done chan struct{}
}

func newLiveOutput(emit func(OutputChunk), lim liveLimits) *liveOutput {
	ctx, stop := context.WithCancel(context.Background())
	l := &liveOutput{emit: emit, lim: lim, kick: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
	go l.timer(ctx)
	return l
}

// writer returns the io.Writer of one stream.
func (l *liveOutput) writer(stream string) *liveWriter { return &liveWriter{l: l, stream: stream} }

type liveWriter struct {
	l      *liveOutput
	stream string
}

func (w *liveWriter) Write(p []byte) (int, error) {
	w.l.write(w.stream, p)
	return len(p), nil
}

func (l *liveOutput) write(stream string, p []byte) {
	l.emitMu.Lock()
	defer l.emitMu.Unlock()
	for len(p) > 0 {
		l.mu.Lock()
		if l.capped {
			l.mu.Unlock()
			return
		}
		var out []OutputChunk
		if stream != l.stream && len(l.pending) > 0 {
			out = l.take(true)
		}
		if l.capped {
			l.mu.Unlock()
			l.send(out)
			return
		}
		l.stream = stream
		// At least a byte: a held partial character may fill the chunk.
		n := min(len(p), max(l.lim.chunk-len(l.pending), 1))
		l.pending = append(l.pending, p[:n]...)
		p = p[n:]
		if len(l.pending) >= l.lim.chunk {
			out = append(out, l.take(false)...)
		}
		if len(l.pending) > 0 {
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
		l.mu.Unlock()
		l.send(out)
	}
}

// take returns the chunks the pending bytes make, within the caps, and
// leaves the bytes of an incomplete UTF-8 character at the end pending
// unless all is set. Called with l.mu held.
func (l *liveOutput) take(all bool) []OutputChunk {
	if l.capped {
		return nil
	}
	data := l.pending
	keep := 0
	if !all {
		keep = incompleteTail(data)
	}
	data = data[:len(data)-keep]
	if len(data) == 0 {
		return nil
	}
	text := toValidUTF8(data)
	l.pending = append(l.pending[:0], l.pending[len(l.pending)-keep:]...)
	var out []OutputChunk
	// The last of the maxCount deltas is kept for the capped one.
	if l.offset+int64(len(text)) > l.lim.maxBytes || l.count+1 >= l.lim.maxCount {
		room := max(l.lim.maxBytes-l.offset, 0)
		if cut := truncateValid(text, int(min(room, int64(len(text))))); cut != "" && l.count+2 <= l.lim.maxCount {
			out = append(out, OutputChunk{Stream: l.stream, Data: cut, Offset: l.offset})
			l.offset += int64(len(cut))
			l.count++
		}
		out = append(out, OutputChunk{Stream: l.stream, Offset: l.offset, Capped: true})
		l.count++
		l.capped, l.pending = true, nil
		return out
	}
	l.count++
	out = append(out, OutputChunk{Stream: l.stream, Data: text, Offset: l.offset})
	l.offset += int64(len(text))
	return out
}

// send emits chunks in order. Called with emitMu held and mu not.
func (l *liveOutput) send(out []OutputChunk) {
	for _, c := range out {
		l.emit(c)
	}
}

// timer flushes what waits LiveOutputInterval after it was kicked.
func (l *liveOutput) timer(ctx context.Context) {
	defer close(l.done)
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		}
		t.Reset(l.lim.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		l.flush(false)
	}
}

// flush emits what is pending (all: an incomplete character too).
func (l *liveOutput) flush(all bool) {
	l.emitMu.Lock()
	defer l.emitMu.Unlock()
	l.mu.Lock()
	out := l.take(all)
	l.mu.Unlock()
	l.send(out)
}

// close stops the timer and emits what is left. The command's output
// has been read to its end when it is called.
func (l *liveOutput) close() {
	l.stop()
	<-l.done
	l.flush(true)
}

// incompleteTail returns how many bytes at the end of b begin a UTF-8
// character that is not whole yet (0 to 3).
func incompleteTail(b []byte) int {
	for n := 1; n <= min(3, len(b)); n++ {
		c := b[len(b)-n]
		if c < utf8.RuneSelf {
			return 0 // ASCII: nothing is open
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[len(b)-n:]) {
				return 0
			}
			return n
		}
	}
	return 0
}

// toValidUTF8 is b as a string, with invalid bytes replaced by U+FFFD.
func toValidUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var out []rune
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		out = append(out, r) // RuneError for an invalid byte
		b = b[size:]
	}
	return string(out)
}

// truncateValid cuts s to at most n bytes on a character boundary.
func truncateValid(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
