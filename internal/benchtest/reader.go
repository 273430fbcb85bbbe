package benchtest

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Sample is one delta frame a Reader read.
type Sample struct {
	Seq int32 // the delta's sequence number (DeltaSeq)
	At  int64 // when its read completed, in ns since the Reader's base
}

// Reader reads one connection on a goroutine of its own until the
// connection ends, counting the delta frames (those DeltaSeq parses)
// and, if asked, recording when each one arrived. Frames of other kinds
// are read and skipped.
type Reader struct {
	ws      *websocket.Conn
	base    time.Time
	record  bool
	want    int64
	got     atomic.Int64
	samples []Sample      // written by the reader goroutine only
	done    chan struct{} // closed when want deltas arrived
	exited  chan struct{} // closed when the reader goroutine returns
	err     error         // why it returned; read after exited
}

// NewReader starts reading ws. base is the origin of the samples'
// times; want is the number of deltas after which Done is closed; if
// record, every delta's Sample is kept (room for want is made up
// front, so recording allocates nothing on the way).
func NewReader(ws *websocket.Conn, base time.Time, want int, record bool) *Reader {
	r := &Reader{ws: ws, base: base, record: record, want: int64(want), done: make(chan struct{}), exited: make(chan struct{})}
	if record {
		r.samples = make([]Sample, 0, want)
	}
	go r.run()
	return r
}

func (r *Reader) run() {
	defer close(r.exited)
	buf := make([]byte, 4096)
	for {
		var n int
		var err error
		buf, n, err = ReadMessage(context.Background(), r.ws, buf)
		if err != nil {
			r.err = err
			return
		}
		at := int64(time.Since(r.base))
		seq := DeltaSeq(buf[:n])
		if seq < 0 {
			continue
		}
		if r.record {
			r.samples = append(r.samples, Sample{int32(seq), at})
		}
		if r.got.Add(1) == r.want {
			close(r.done)
		}
	}
}

// Got is the number of deltas read so far.
func (r *Reader) Got() int64 { return r.got.Load() }

// Done is closed once want deltas were read.
func (r *Reader) Done() <-chan struct{} { return r.done }

// Exited is closed once the reader stopped (its connection ended).
func (r *Reader) Exited() <-chan struct{} { return r.exited }

// Err is why the reader stopped; valid once Exited is closed.
func (r *Reader) Err() error { return r.err }

// Samples are the recorded deltas in the order read; valid once Exited
// is closed (CloseAll).
func (r *Reader) Samples() []Sample { return r.samples }

// WaitAll waits until every reader read its want deltas, or ended
// early, or timeout passed. It returns the number of readers that ended
// early (all of them on a timeout) and why the last one did.
func WaitAll(rs []*Reader, timeout time.Duration) (failed int, why string) {
	deadline := time.After(timeout)
	for _, r := range rs {
		select {
		case <-r.done:
		case <-r.exited:
			failed++
			why = fmt.Sprintf("client ended after %d frames: close status %d: %v", r.got.Load(), websocket.CloseStatus(r.err), r.err)
		case <-deadline:
			return len(rs), "timed out"
		}
	}
	return failed, why
}

// WaitGot waits (polling) until every reader read at least n deltas;
// it fails as soon as one ended, or once timeout passed.
func WaitGot(rs []*Reader, n int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, r := range rs {
		for r.got.Load() < n {
			select {
			case <-r.exited:
				return fmt.Errorf("a client ended after %d of %d deltas: close status %d: %v", r.got.Load(), n, websocket.CloseStatus(r.err), r.err)
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("timed out: a client got %d of %d deltas", r.got.Load(), n)
			}
			time.Sleep(500 * time.Microsecond)
		}
	}
	return nil
}

// CloseAll closes the readers' connections and waits until every
// reader stopped: their samples are complete then.
func CloseAll(rs []*Reader) {
	for _, r := range rs {
		r.ws.CloseNow()
	}
	for _, r := range rs {
		<-r.exited
	}
}

// Latencies returns the sorted latencies (µs) of the recorded deltas
// with sequence numbers in [from, to) of every reader, given each
// delta's emit time (ns since the readers' base) in emitAt. Call it
// after CloseAll.
func Latencies(rs []*Reader, emitAt []int64, from, to int) []float64 {
	var out []float64
	for _, r := range rs {
		for _, s := range r.samples {
			if int(s.Seq) >= from && int(s.Seq) < to {
				out = append(out, float64(s.At-emitAt[s.Seq])/1e3)
			}
		}
	}
	slices.Sort(out)
	return out
}

// EmitPaced sends deltas first to end-1 on a schedule: delta i at
// start + (i-first)·interval, sleeping until then (a late one goes at
// once), where start is when EmitPaced was called. It records each
// send's time, in ns since base, in emitAt[i] just before the send.
func EmitPaced(base time.Time, emitAt []int64, first, end int, interval time.Duration, send func(i int) error) error {
	start := time.Now()
	for i := first; i < end; i++ {
		if d := time.Until(start.Add(time.Duration(i-first) * interval)); d > 0 {
			time.Sleep(d)
		}
		emitAt[i] = int64(time.Since(base))
		if err := send(i); err != nil {
			return err
		}
	}
	return nil
}

// NewReaders starts a Reader on each connection, all with the same
// base, want and record.
func NewReaders(conns []*websocket.Conn, base time.Time, want int, record bool) []*Reader {
	rs := make([]*Reader, len(conns))
	for i, ws := range conns {
		rs[i] = NewReader(ws, base, want, record)
	}
	return rs
}
