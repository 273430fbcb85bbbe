package feed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

// errStop stops a replay whose write failed.
var errStop = errors.New("feed: write failed")

// Serve serves a subscribed client until it goes away, falls behind,
// stops answering heartbeats, or shutdown is closed: the ack, the
// snapshot or the replay, then live events. It accounts for the end
// (metrics, one log line), detaches the client from h, and returns the
// End. ctx bounds the replay's reads; the transport cancels it when the
// connection is torn down.
func (f *Feed) Serve(ctx context.Context, h *hub.Hub, att *hub.Attachment, shutdown <-chan struct{}) End {
	f.client = att.Client
	f.client.OnOverflow(f.dl.hurry)
	if f.m != nil {
		f.m.Clients.Inc()
	}
	var e End
	if f.attach(ctx, att) {
		e = f.stopped(f.live(ctx, shutdown))
	} else {
		e = f.broken()
	}
	f.finish(e)
	if f.m != nil {
		f.m.Clients.Dec()
	}
	h.Unsubscribe(f.client)
	return e
}

// attach writes the ack, then the snapshot or the replay.
func (f *Feed) attach(ctx context.Context, att *hub.Attachment) bool {
	if !f.Send("", protocol.Marshal(att.Ack)) {
		return false
	}
	if att.Snapshot != nil && !f.Send(att.Seam, att.Snapshot) {
		return false
	}
	err := att.StreamReplayBatches(ctx, func(items []*hub.Item) error {
		if !f.writeBatch(items, false) {
			return errStop
		}
		return nil
	})
	if err != nil {
		switch {
		case errors.Is(err, errStop):
		case ctx.Err() != nil:
			// The client left (or the server is stopping) mid-replay.
			f.log.Debug("replay stopped", "session", f.sid, "err", err)
			f.fail(fmt.Errorf("feed: replay: %w", err))
		default:
			f.log.Error("replay", "session", f.sid, "err", err)
			f.fail(fmt.Errorf("feed: replay: %w", err))
		}
		return false
	}
	return true
}

// stop is why the live loop returned; stopped turns it into the End.
type stop uint8

const (
	stopBroken    stop = iota // a write failed
	stopTooSlow               // the queue overflowed, or the hub resynchronises the client
	stopHeartbeat             // heartbeats went unanswered
	stopGone                  // the transport went away
	stopShutdown              // the server is stopping
)

// live drains the client's queue until the feed ends, and says why.
//
// An idle client's goroutine is parked in this loop for as long as the
// client stays, so the loop keeps its stack frame small: it returns a
// stop, and the End (its close detail, the close frame's write) is made
// by stopped, after the loop has returned. A parked goroutine's stack
// shrinks only while it uses under a quarter of it; with the End's
// paths in this loop an idle WebSocket client held 4 KiB more of stack
// (BenchmarkIdleConnMemory in internal/stream: 10.7 KiB of stacks per
// idle client, 6.5 without them).
func (f *Feed) live(ctx context.Context, shutdown <-chan struct{}) stop {
	var batch []*hub.Item
	var inbox <-chan Inbound
	if f.recv != nil {
		inbox = f.recv.Inbox()
	}
	ticker := time.NewTicker(f.cfg.PingInterval)
	defer ticker.Stop()
	for {
		select {
		case <-f.client.Notify():
			var overflown bool
			batch, overflown = f.client.Drain(batch)
			if overflown {
				// An overflow hurried the deadline already; a resync (a
				// lost event) marks the queue the same way without it.
				f.dl.hurry()
				return stopTooSlow
			}
			if f.m != nil {
				f.m.QueueDepth.Observe(float64(len(batch)))
			}
			if !f.writeBatch(batch, true) {
				return stopBroken
			}
		case in := <-inbox:
			if !f.recv.Receive(ctx, in) {
				return stopBroken
			}
		case <-ticker.C:
			switch f.tick() {
			case hbDead:
				return stopHeartbeat
			case hbSend:
				if !f.heartbeat() {
					return stopBroken
				}
			}
		case <-f.t.Gone():
			return stopGone
		case <-shutdown:
			if items, overflown := f.client.Drain(batch); !overflown {
				f.writeBatch(items, true) // flush what is queued before going away
			}
			return stopShutdown
		}
	}
}

// stopped makes the End of a live loop that returned s, closing the
// stream where s calls for it. It is never inlined: its frame would
// join Serve's, which is on the stack of every parked client.
//
//go:noinline
func (f *Feed) stopped(s stop) End {
	switch s {
	case stopTooSlow:
		return f.tooSlow()
	case stopHeartbeat:
		return f.close(protocol.ClosePolicyViolation, protocol.CloseDetail{
			CloseReason: protocol.ReasonHeartbeatTimeout, MissedPings: f.outstanding})
	case stopGone:
		return End{Err: f.err}
	case stopShutdown:
		return f.close(protocol.CloseGoingAway, protocol.CloseDetail{CloseReason: protocol.ReasonShutdown})
	}
	return f.broken()
}

// writeBatch writes items in order under one deadline (a batch that
// cannot go out within the write timeout means the client stopped
// reading), flushes them, and counts them. Live batches observe the
// delta latency; a replay's batches (read from the store a batch at a
// time, so the reads are no write's time) do not: their deltas are old
// by design.
func (f *Feed) writeBatch(items []*hub.Item, live bool) bool {
	if len(items) == 0 {
		return true
	}
	f.wrote = true
	f.dl.arm()
	defer f.dl.disarm()
	var now time.Time
	for i, it := range items {
		if f.dl.hurried.Load() || !f.writeItem(it) {
			f.countSent(i)
			return false
		}
		if live && f.m != nil && it.Type == event.TextDelta {
			if now.IsZero() {
				now = time.Now()
			}
			f.m.DeltaLatency.Observe(now.Sub(it.TS).Seconds())
		}
	}
	f.countSent(len(items))
	return f.flush()
}

func (f *Feed) countSent(n int) {
	if f.m != nil && n > 0 {
		f.m.EventsSent.Add(float64(n))
	}
}
