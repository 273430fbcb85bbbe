package feed

import (
	"context"
	"log/slog"

	"github.com/metis-agent/metis/protocol"
)

// End is how a feed ended. The metrics, the log line and the close the
// client got are all made from it.
type End struct {
	// Code is the close code the feed closed with (1008, 1001), or 0
	// when it closed nothing: the client went away, or the connection
	// was killed (write_timeout).
	Code int
	// Reason is why, with its numbers; its Code is "" when the client
	// went away or a write failed on its own.
	Reason protocol.CloseDetail
	// Resync: closed because events of the session could not be
	// delivered live, not for a full queue: the client must replay
	// (close reason storage_failure when an event could not be stored,
	// resync when events never reached this node, owner_changed when
	// the session's tree moved to another node in cluster mode).
	Resync bool
	// Err is the write (or replay) error that ended the feed, if one did.
	Err error
}

// broken is the End of a feed whose write failed: an overflowed client
// is closed as too slow; a write that outlived the write timeout was
// killed (write_timeout: no close can reach a client that does not
// read); otherwise the client went away.
func (f *Feed) broken() End {
	switch {
	case f.dl.hurried.Load():
		return f.tooSlow()
	case f.dl.expired.Load():
		return End{Reason: protocol.CloseDetail{CloseReason: protocol.ReasonWriteTimeout,
			StalledMS: f.cfg.WriteTimeout.Milliseconds()}, Err: f.err}
	}
	return End{Err: f.err}
}

// tooSlow closes an overflowed client with client_too_slow, within
// what the deadline leaves (the overflow grace), with what its queue
// held; a client the hub resynchronises (an event of its session could
// not be stored) is closed with storage_failure instead.
func (f *Feed) tooSlow() End {
	o, _ := f.client.Overflow()
	if o.Resync {
		d := protocol.CloseDetail{CloseReason: protocol.ReasonStorageFailure}
		if o.Reason.Code != "" {
			d.CloseReason = o.Reason
		}
		e := f.close(protocol.ClosePolicyViolation, d)
		e.Resync = true
		return e
	}
	d := protocol.CloseDetail{CloseReason: protocol.ReasonClientTooSlow,
		QueueEvents: o.Events, QueueBytes: o.Bytes, StalledMS: f.dl.stalledFor().Milliseconds()}
	return f.close(protocol.ClosePolicyViolation, d)
}

// close ends the stream with a code and reason, under the deadline: a
// client that does not take the close in time is killed.
func (f *Feed) close(code int, d protocol.CloseDetail) End {
	f.dl.arm()
	err := f.t.Close(code, d)
	f.dl.disarm()
	if err != nil && f.err == nil {
		f.err = err
	}
	return End{Code: code, Reason: d, Err: f.err}
}

// Close ends a feed that is not serving (a WebSocket that never
// subscribed) with a code and reason, and accounts for it.
func (f *Feed) Close(code int, r protocol.CloseReason) End {
	e := f.close(code, protocol.CloseDetail{CloseReason: r})
	f.finish(e)
	return e
}

// finish accounts for an End: the close metrics and one log line.
func (f *Feed) finish(e End) {
	code := e.Reason.Code
	if f.m != nil && code != "" {
		f.m.Closes.WithLabelValues(code).Inc()
		if code == protocol.ReasonClientTooSlow.Code {
			f.m.SlowCloses.Inc()
		}
	}
	level := slog.LevelDebug
	switch code {
	case protocol.ReasonClientTooSlow.Code, protocol.ReasonWriteTimeout.Code, protocol.ReasonStorageFailure.Code:
		level = slog.LevelWarn
	case protocol.ReasonHeartbeatTimeout.Code, protocol.ReasonResync.Code, protocol.ReasonOwnerChanged.Code:
		level = slog.LevelInfo
	}
	if !f.log.Enabled(context.Background(), level) {
		return
	}
	attrs := []slog.Attr{slog.String("transport", f.kind), slog.String("session", f.sid)}
	if f.client != nil {
		attrs = append(attrs, slog.String("client", f.client.Name))
	}
	if code == "" {
		code = "client_gone"
	}
	attrs = append(attrs, slog.String("reason", code))
	if e.Code != 0 {
		attrs = append(attrs, slog.Int("close_code", e.Code))
	}
	if e.Resync {
		attrs = append(attrs, slog.Bool("resync", true))
	}
	for _, n := range []struct {
		key string
		v   int64
	}{{"queue_events", int64(e.Reason.QueueEvents)}, {"queue_bytes", e.Reason.QueueBytes},
		{"stalled_ms", e.Reason.StalledMS}, {"missed_pings", int64(e.Reason.MissedPings)}} {
		if n.v != 0 {
			attrs = append(attrs, slog.Int64(n.key, n.v))
		}
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	f.log.LogAttrs(context.Background(), level, "stream client closed", attrs...)
}
