package feed

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/metrics"
)

// Config holds a feed's limits.
type Config struct {
	PingInterval time.Duration // idle time before a heartbeat (default 30s)
	// PingMisses is how many heartbeats may go unanswered before the
	// feed closes with heartbeat_timeout; 0 for a transport whose client
	// never answers (SSE: a dead client is found by a failing write).
	PingMisses   int
	WriteTimeout time.Duration // longest a write may take (default 10s)
	// OverflowGrace is what an overflowed client still gets to take the
	// write in progress and the close (default OverflowGrace).
	OverflowGrace time.Duration
	Logger        *slog.Logger
	Metrics       *metrics.Stream // nil: none
}

// Feed serves one client over one transport. Its methods, except what
// Transport.Kill and the overflow hook do, run on one goroutine: the
// transport's handler.
type Feed struct {
	t      Transport
	recv   Receiver   // nil: the client sends nothing while subscribed
	iw     ItemWriter // nil: events are written with Write
	cfg    Config
	kind   string // the transport, for logs: "websocket", "sse"
	sid    string
	log    *slog.Logger
	m      *metrics.Stream
	dl     *deadline
	client *hub.Client // set by Serve

	wrote       bool  // something was written since the last heartbeat tick
	outstanding int   // heartbeats sent since the last pong
	seq         int   // heartbeat nonces
	err         error // the first write error
}

// New returns a feed writing to t, for a client of session sessionID;
// kind names the transport in logs.
func New(t Transport, kind, sessionID string, cfg Config) *Feed {
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.OverflowGrace <= 0 {
		cfg.OverflowGrace = OverflowGrace
	}
	cfg.PingMisses = max(cfg.PingMisses, 0)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &Feed{t: t, cfg: cfg, kind: kind, sid: sessionID, log: cfg.Logger, m: cfg.Metrics}
	f.recv, _ = t.(Receiver)
	f.iw, _ = t.(ItemWriter)
	f.dl = newDeadline(cfg.WriteTimeout, cfg.OverflowGrace, t.Kill)
	return f
}

// Send writes one frame at once (written and flushed under the
// deadline), such as a reply to a client frame, and reports whether it
// went out. cursor is as for Transport.Write.
func (f *Feed) Send(cursor string, frame []byte) bool {
	f.wrote = true
	f.dl.arm()
	defer f.dl.disarm()
	return f.write(cursor, frame) && f.flush()
}

// Pong records a client's pong: it answers every heartbeat sent so far.
func (f *Feed) Pong() { f.outstanding = 0 }

// Stop releases the feed's timer. The transport calls it once the
// connection is torn down; the feed must not be used after.
func (f *Feed) Stop() { f.dl.stop() }

// Hurried reports whether the client's queue overflowed.
func (f *Feed) Hurried() bool { return f.dl.hurried.Load() }

func (f *Feed) write(cursor string, frame []byte) bool {
	if err := f.t.Write(cursor, frame); err != nil {
		f.fail(err)
		return false
	}
	return true
}

// writeItem writes one event, through the transport's shared encoding
// where it has one.
func (f *Feed) writeItem(it *hub.Item) bool {
	if f.iw == nil {
		return f.write(it.ID, it.Frame)
	}
	if err := f.iw.WriteItem(it); err != nil {
		f.fail(err)
		return false
	}
	return true
}

func (f *Feed) flush() bool {
	if err := f.t.Flush(); err != nil {
		f.fail(err)
		return false
	}
	return true
}

// fail keeps the first write error: the one that ended the client.
func (f *Feed) fail(err error) {
	if f.err == nil {
		f.err = err
	}
}

// heartbeatAction is what a heartbeat tick does.
type heartbeatAction int

const (
	hbNone heartbeatAction = iota
	hbSend
	hbDead
)

// tick runs on the ping interval: nothing if the client was written to
// since the last tick (heartbeats do not count), a heartbeat otherwise,
// or the end if PingMisses heartbeats went unanswered.
func (f *Feed) tick() heartbeatAction {
	if f.wrote {
		f.wrote = false
		return hbNone
	}
	if f.cfg.PingMisses > 0 {
		if f.outstanding >= f.cfg.PingMisses {
			return hbDead
		}
		f.outstanding++
	}
	return hbSend
}

// heartbeat sends one heartbeat under the deadline.
func (f *Feed) heartbeat() bool {
	f.seq++
	f.dl.arm()
	defer f.dl.disarm()
	if err := f.t.Heartbeat("srv-" + strconv.Itoa(f.seq)); err != nil {
		f.fail(err)
		return false
	}
	return f.flush()
}
