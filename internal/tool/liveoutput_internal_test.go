package tool

import (
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/protocol"
)

// chunks records what a liveOutput emits.
type chunks struct {
	mu  sync.Mutex
	got []OutputChunk
}

func (c *chunks) emit(o OutputChunk) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, o)
}

func (c *chunks) all() []OutputChunk {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]OutputChunk(nil), c.got...)
}

// never is an interval no test waits for: only a full chunk, a change
// of stream or close flushes.
const never = time.Hour

func TestLiveOutputCoalescesSmallWrites(t *testing.T) {
	var c chunks
	l := newLiveOutput(c.emit, liveLimits{interval: never, chunk: 8 << 10, maxBytes: 1 << 20, maxCount: 100})
	w := l.writer(protocol.OutputStdout)
	for range 100 {
		_, _ = w.Write([]byte("line\n"))
	}
	if n := len(c.all()); n != 0 {
		t.Fatalf("%d deltas before the interval or a full chunk", n)
	}
	l.close()
	got := c.all()
	if len(got) != 1 || got[0].Data != strings.Repeat("line\n", 100) || got[0].Stream != protocol.OutputStdout || got[0].Offset != 0 {
		t.Fatalf("got %+v, want one delta with the 100 writes", got)
	}
}

func TestLiveOutputSendsAFullChunkAtOnce(t *testing.T) {
	var c chunks
	l := newLiveOutput(c.emit, liveLimits{interval: never, chunk: 16, maxBytes: 1 << 20, maxCount: 100})
	_, _ = l.writer(protocol.OutputStdout).Write([]byte(strings.Repeat("x", 40)))
	if got := c.all(); len(got) != 2 || len(got[0].Data) != 16 || got[1].Offset != 16 {
		t.Fatalf("before close: %+v, want two full chunks", got)
	}
	l.close()
	if got := c.all(); len(got) != 3 || got[2].Data != strings.Repeat("x", 8) || got[2].Offset != 32 {
		t.Fatalf("after close: %+v", got)
	}
}

func TestLiveOutputFlushesAfterTheInterval(t *testing.T) {
	var c chunks
	l := newLiveOutput(c.emit, liveLimits{interval: 5 * time.Millisecond, chunk: 8 << 10, maxBytes: 1 << 20, maxCount: 100})
	defer l.close()
	_, _ = l.writer(protocol.OutputStderr).Write([]byte("progress"))
	deadline := time.Now().Add(10 * time.Second)
	for len(c.all()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a pending write was never flushed by the timer")
		}
		time.Sleep(time.Millisecond)
	}
	if got := c.all(); got[0].Data != "progress" || got[0].Stream != protocol.OutputStderr {
		t.Fatalf("got %+v", got)
	}
}

func TestLiveOutputKeepsTheOrderOfStdoutAndStderr(t *testing.T) {
	var c chunks
	l := newLiveOutput(c.emit, liveLimits{interval: never, chunk: 8 << 10, maxBytes: 1 << 20, maxCount: 100})
	out, errw := l.writer(protocol.OutputStdout), l.writer(protocol.OutputStderr)
	_, _ = out.Write([]byte("a"))
	_, _ = out.Write([]byte("b"))
	_, _ = errw.Write([]byte("E"))
	_, _ = out.Write([]byte("c"))
	l.close()
	var b strings.Builder
	for _, o := range c.all() {
		b.WriteString(o.Stream[3:4] + ":" + o.Data + " ")
	}
	if got := b.String(); got != "o:ab e:E o:c " {
		t.Fatalf("got %q", got)
	}
}

func TestLiveOutputStopsAtTheByteCap(t *testing.T) {
	var c chunks
	l := newLiveOutput(c.emit, liveLimits{interval: never, chunk: 16, maxBytes: 40, maxCount: 100})
	w := l.writer(protocol.OutputStdout)
	_, _ = w.Write([]byte(strings.Repeat("y", 100)))
	_, _ = w.Write([]byte("more"))
	l.close()
	got := c.all()
	var data strings.Builder
	for i, o := range got {
		data.WriteString(o.Data)
		if o.Capped != (i == len(got)-1) {
			t.Fatalf("delta %d capped=%v; only the last one says capped: %+v", i, o.Capped, got)
		}
	}
	if data.Len() != 40 || got[len(got)-1].Offset != 40 || got[len(got)-1].Data != "" {
		t.Fatalf("streamed %d bytes, last %+v; want 40 and an empty capped delta", data.Len(), got[len(got)-1])
	}
}

func TestLiveOutputStopsAtTheDeltaCap(t *testing.T) {
	var c chunks
	l := newLiveOutput(c.emit, liveLimits{interval: never, chunk: 4, maxBytes: 1 << 20, maxCount: 5})
	_, _ = l.writer(protocol.OutputStdout).Write([]byte(strings.Repeat("z", 100)))
	l.close()
	got := c.all()
	if len(got) != 5 || !got[4].Capped || got[3].Capped {
		t.Fatalf("got %d deltas %+v, want 4 and a capped one", len(got), got)
	}
}

func TestLiveOutputNeverSplitsACharacter(t *testing.T) {
	var c chunks
	l := newLiveOutput(c.emit, liveLimits{interval: never, chunk: 4, maxBytes: 1 << 20, maxCount: 100})
	w := l.writer(protocol.OutputStdout)
	// "abcé": the chunk fills in the middle of é (2 bytes).
	_, _ = w.Write([]byte("abc\xc3"))
	_, _ = w.Write([]byte("\xa9!"))
	l.close()
	var b strings.Builder
	for _, o := range c.all() {
		if strings.ContainsRune(o.Data, '\uFFFD') {
			t.Fatalf("a delta holds half a character: %+v", c.all())
		}
		b.WriteString(o.Data)
	}
	if b.String() != "abcé!" {
		t.Fatalf("got %q", b.String())
	}
}

func TestLiveOutputReplacesInvalidBytes(t *testing.T) {
	var c chunks
	l := newLiveOutput(c.emit, liveLimits{interval: never, chunk: 1 << 10, maxBytes: 1 << 20, maxCount: 100})
	_, _ = l.writer(protocol.OutputStdout).Write([]byte("a\xffb\xc3"))
	l.close()
	if got := c.all(); len(got) != 1 || got[0].Data != "a\uFFFDb\uFFFD" {
		t.Fatalf("got %+v", got)
	}
}

// TestLiveOutputProperties: for any writes and limits, the deltas, in
// order, are the output in the order written, cut at the byte cap;
// each offset is the bytes before it; at most maxCount deltas, each at
// most chunk bytes; only a last delta says capped, and then one says it.
func TestLiveOutputProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim := liveLimits{interval: never, chunk: rapid.IntRange(1, 64).Draw(t, "chunk"),
			maxBytes: int64(rapid.IntRange(0, 400).Draw(t, "maxBytes")), maxCount: rapid.IntRange(1, 40).Draw(t, "maxCount")}
		var c chunks
		l := newLiveOutput(c.emit, lim)
		ws := map[bool]*liveWriter{false: l.writer(protocol.OutputStdout), true: l.writer(protocol.OutputStderr)}
		var want strings.Builder // "o:" / "e:" per byte
		total := 0
		for _, n := range rapid.SliceOfN(rapid.IntRange(-30, 30), 0, 30).Draw(t, "writes") {
			isErr, size := n < 0, max(n, -n)
			p := strings.Repeat(map[bool]string{false: "o", true: "e"}[isErr], size)
			_, _ = ws[isErr].Write([]byte(p))
			want.WriteString(p)
			total += size
		}
		l.close()
		got := c.all()
		var seen strings.Builder
		var off int64
		capped := false
		for i, o := range got {
			if capped {
				t.Fatalf("delta %d after the capped one", i)
			}
			if o.Offset != off {
				t.Fatalf("delta %d offset %d, want %d", i, o.Offset, off)
			}
			if len(o.Data) > lim.chunk {
				t.Fatalf("delta %d of %d bytes > chunk %d", i, len(o.Data), lim.chunk)
			}
			for _, ch := range o.Data {
				if string(ch) != o.Stream[3:4] {
					t.Fatalf("delta %d on %s holds %q", i, o.Stream, ch)
				}
			}
			seen.WriteString(o.Data)
			off += int64(len(o.Data))
			capped = o.Capped
		}
		if len(got) > lim.maxCount {
			t.Fatalf("%d deltas > cap %d", len(got), lim.maxCount)
		}
		if !strings.HasPrefix(want.String(), seen.String()) {
			t.Fatalf("streamed %q is not a prefix of the output %q", seen.String(), want.String())
		}
		if !capped && seen.Len() != total {
			t.Fatalf("not capped but streamed %d of %d bytes", seen.Len(), total)
		}
		if capped && int64(seen.Len()) > lim.maxBytes {
			t.Fatalf("streamed %d bytes past the cap %d", seen.Len(), lim.maxBytes)
		}
		if int64(total) <= lim.maxBytes && total <= (lim.maxCount-1) && capped {
			t.Fatalf("capped though %d bytes fit in %d deltas", total, lim.maxCount-1)
		}
	})
}

// TestLiveOutputTinyChunkMakesProgress: a held partial character that
// fills a chunk by itself does not stall the writer.
func TestLiveOutputTinyChunkMakesProgress(t *testing.T) {
	var c chunks
	l := newLiveOutput(c.emit, liveLimits{interval: never, chunk: 1, maxBytes: 1 << 20, maxCount: 100})
	_, _ = l.writer(protocol.OutputStdout).Write([]byte("éé"))
	l.close()
	var b strings.Builder
	for _, o := range c.all() {
		b.WriteString(o.Data)
	}
	if b.String() != "éé" {
		t.Fatalf("got %q", b.String())
	}
}
