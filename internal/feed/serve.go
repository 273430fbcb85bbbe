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

// replayFlush is how many replayed frames a transport may buffer
// before the feed flushes them.
const replayFlush = 64

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
		e = f.live(ctx, shutdown)
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
	n := 0
	err := att.StreamReplay(ctx, func(it *hub.Item) error {
		if f.dl.hurried.Load() || !f.writeItem(it) {
			return errStop
		}
		n++
		if n%replayFlush == 0 && !f.flushArmed() {
			return errStop
		}
		return nil
	})
	f.countSent(n)
	if err != nil {
		if !errors.Is(err, errStop) {
			f.log.Error("replay", "session", f.sid, "err", err)
			f.fail(fmt.Errorf("feed: replay: %w", err))
		}
		return false
	}
	return n%replayFlush == 0 || f.flushArmed()
}

// writeItem writes one replayed event under its own deadline: the
// store is read between events, and that is no write's time.
func (f *Feed) writeItem(it *hub.Item) bool {
	f.wrote = true
	f.dl.arm()
	ok := f.write(it.ID, it.Frame)
	f.dl.disarm()
	if ok && f.m != nil && it.Type == event.TextDelta {
		f.m.DeltaLatency.Observe(time.Since(it.TS).Seconds())
	}
	return ok
}

func (f *Feed) flushArmed() bool {
	f.dl.arm()
	defer f.dl.disarm()
	return f.flush()
}

// live drains the client's queue until the feed ends.
func (f *Feed) live(ctx context.Context, shutdown <-chan struct{}) End {
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
				return f.tooSlow()
			}
			if f.m != nil {
				f.m.QueueDepth.Observe(float64(len(batch)))
			}
			if !f.writeBatch(batch) {
				return f.broken()
			}
		case in := <-inbox:
			if !f.recv.Receive(ctx, in) {
				return f.broken()
			}
		case <-ticker.C:
			switch f.tick() {
			case hbDead:
				return f.close(protocol.ClosePolicyViolation, protocol.CloseDetail{
					CloseReason: protocol.ReasonHeartbeatTimeout, MissedPings: f.outstanding})
			case hbSend:
				if !f.heartbeat() {
					return f.broken()
				}
			}
		case <-f.t.Gone():
			return End{Err: f.err}
		case <-shutdown:
			if items, overflown := f.client.Drain(batch); !overflown {
				f.writeBatch(items) // flush what is queued before going away
			}
			return f.close(protocol.CloseGoingAway, protocol.CloseDetail{CloseReason: protocol.ReasonShutdown})
		}
	}
}

// writeBatch writes queued items in order under one deadline (a batch
// that cannot go out within the write timeout means the client stopped
// reading), flushes them, and counts them.
func (f *Feed) writeBatch(items []*hub.Item) bool {
	if len(items) == 0 {
		return true
	}
	f.wrote = true
	f.dl.arm()
	defer f.dl.disarm()
	var now time.Time
	for i, it := range items {
		if f.dl.hurried.Load() || !f.write(it.ID, it.Frame) {
			f.countSent(i)
			return false
		}
		if f.m != nil && it.Type == event.TextDelta {
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
