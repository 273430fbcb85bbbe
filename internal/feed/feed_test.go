package feed_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/feed"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/protocol"
)

var quick = feed.Config{PingInterval: time.Hour, WriteTimeout: time.Minute, Logger: quiet}

func (e *env) config(c feed.Config) feed.Config {
	c.Metrics = e.m
	if c.Logger == nil {
		c.Logger = quiet
	}
	return c
}

// TestServeOrder: the ack (no cursor), the replay (each event with its
// id as cursor), then live events, each once and in id order; on
// shutdown the queue is flushed, then the feed closes going-away; the
// client is detached and counted out.
func TestServeOrder(t *testing.T) {
	e := newEnv(t, hub.Config{})
	first := e.emit(event.TextDelta, nil)
	var want []string
	for range 3 {
		want = append(want, e.emit(event.TextDelta, nil).ID)
	}
	since := first.ID
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Since: &since})
	tr := newFake()
	shutdown := make(chan struct{})
	end := serve(e, feed.New(tr, "fake", e.sid, e.config(quick)), att, shutdown)
	for range 3 {
		want = append(want, e.emit(event.TextDelta, nil).ID)
	}
	tr.wait(t, "the live events", func(f *fake) bool { return len(f.frames) >= 1+len(want) })
	last := e.emit(event.TurnCompleted, map[string]string{})
	close(shutdown)
	got := end()
	if got.Code != protocol.CloseGoingAway || got.Reason.Code != protocol.ReasonShutdown.Code || got.Err != nil {
		t.Fatalf("end %+v", got)
	}
	frames, _, closes, _ := tr.snapshot()
	if frames[0].frame.Type != protocol.TypeSubscribeAck || frames[0].cursor != "" || frames[0].frame.Ack.ReplayEventCount != 3 {
		t.Fatalf("first frame %+v", frames[0])
	}
	// Meta-events (the subscription's registration) come live too; keep
	// the session's own.
	var ids []string
	for _, w := range frames[1:] {
		if w.frame.Type != protocol.TypeEvent || w.cursor != w.frame.Event.ID {
			t.Fatalf("frame %+v: not an event with its id as cursor", w)
		}
		if len(ids) > 0 && w.cursor <= ids[len(ids)-1] {
			t.Fatalf("cursor %s after %s", w.cursor, ids[len(ids)-1])
		}
		ids = append(ids, w.cursor)
	}
	for _, id := range append(want, last.ID) {
		if !contains(ids, id) {
			t.Fatalf("event %s missing from %v", id, ids)
		}
	}
	if len(closes) != 1 || closes[0].Code != 1001 {
		t.Fatalf("closes %+v", closes)
	}
	if n := e.h.Clients(e.sid); n != 0 {
		t.Fatalf("%d clients still attached", n)
	}
	if v := value(t, e.m.Clients); v != 0 {
		t.Fatalf("clients gauge %v", v)
	}
	if v := value(t, e.m.Closes.WithLabelValues("server_shutdown")); v != 1 {
		t.Fatalf("server_shutdown closes %v", v)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestServeSnapshotCursor: a snapshot follows the ack, with the seam
// (its snapshot_at_event_id) as its cursor.
func TestServeSnapshotCursor(t *testing.T) {
	e := newEnv(t, hub.Config{SnapshotMessages: 5})
	e.emit(event.TextDelta, nil)
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat, Snapshot: true})
	tr := newFake()
	shutdown := make(chan struct{})
	end := serve(e, feed.New(tr, "fake", e.sid, e.config(quick)), att, shutdown)
	tr.wait(t, "the snapshot", func(f *fake) bool { return len(f.frames) >= 2 })
	close(shutdown)
	end()
	frames, _, _, _ := tr.snapshot()
	snap := frames[1]
	if snap.frame.Type != protocol.TypeSnapshot || snap.cursor == "" || snap.cursor != snap.frame.Snapshot.SnapshotAtEventID ||
		snap.cursor != att.Seam {
		t.Fatalf("second frame %+v, seam %s", snap, att.Seam)
	}
}

// TestOverflowCutsStalledWrite (spec §8.2): a client whose write is
// stalled (it stopped reading) and whose queue then overflows is not
// left to the write timeout (a minute here): the stalled write gets the
// overflow grace, the connection is killed, and the feed ends with
// client_too_slow carrying what the queue held; it is counted as a
// slow-client close and logged once with those numbers.
func TestOverflowCutsStalledWrite(t *testing.T) {
	const queue = 4
	e := newEnv(t, hub.Config{ClientQueue: queue})
	var logs bytes.Buffer
	att := e.subscribe(protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{string(event.TextDelta)}}})
	tr := newFake()
	tr.stallAfter = 1 // the ack goes out; the first event's write blocks
	cfg := e.config(quick)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	end := serve(e, feed.New(tr, "fake", e.sid, cfg), att, nil)
	// One event is taken by the write that stalls; queue more fill the
	// queue; the next overflows it.
	e.emit(event.TextDelta, nil)
	tr.wait(t, "the stalled write", func(f *fake) bool { return f.stalled == 1 })
	for range queue + 1 {
		e.emit(event.TextDelta, nil)
	}
	got := end()
	if got.Code != protocol.ClosePolicyViolation || got.Reason.Code != protocol.ReasonClientTooSlow.Code || got.Resync {
		t.Fatalf("end %+v", got)
	}
	if got.Reason.QueueEvents != queue || got.Reason.QueueBytes <= 0 || got.Err == nil || got.Reason.StalledMS < 0 {
		t.Fatalf("end %+v: want the queue's %d events and their bytes, and the write error", got, queue)
	}
	if _, _, _, killed := tr.snapshot(); !killed {
		t.Fatal("the stalled connection was not killed")
	}
	if v := value(t, e.m.SlowCloses); v != 1 {
		t.Fatalf("slow closes %v", v)
	}
	if v := value(t, e.m.Closes.WithLabelValues("client_too_slow")); v != 1 {
		t.Fatalf("client_too_slow closes %v", v)
	}
	line := logs.String()
	if strings.Count(line, "stream client closed") != 1 || !strings.Contains(line, "reason=client_too_slow") ||
		!strings.Contains(line, "queue_events=4") || !strings.Contains(line, "err=") {
		t.Fatalf("log: %s", line)
	}
}

// TestOverflowReadingClientGetsClose: a client that reads, but whose
// queue overflowed between two wakes of the feed, gets the
// client_too_slow close (with the numbers) rather than a dropped
// connection.
func TestOverflowReadingClientGetsClose(t *testing.T) {
	const queue = 3
	e := newEnv(t, hub.Config{ClientQueue: queue})
	att := e.subscribe(protocol.Subscribe{Filter: protocol.Filter{EventTypes: []string{string(event.TextDelta)}}})
	for range queue + 1 { // overflow before the feed starts
		e.emit(event.TextDelta, nil)
	}
	tr := newFake()
	got := serve(e, feed.New(tr, "fake", e.sid, e.config(quick)), att, nil)()
	_, _, closes, killed := tr.snapshot()
	if got.Reason.Code != protocol.ReasonClientTooSlow.Code || got.Reason.QueueEvents != queue || killed ||
		len(closes) != 1 || closes[0].Code != 1008 || closes[0].Reason != got.Reason {
		t.Fatalf("end %+v, closes %+v, killed %v", got, closes, killed)
	}
}

// TestWriteTimeout: a write that outlives the write timeout kills the
// connection; the feed ends with write_timeout, closes nothing (no close
// could reach a client that does not read), keeps the write error, and
// counts the close.
func TestWriteTimeout(t *testing.T) {
	e := newEnv(t, hub.Config{})
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat})
	tr := newFake()
	tr.stallAfter = 0 // even the ack stalls
	cfg := e.config(quick)
	cfg.WriteTimeout = 20 * time.Millisecond
	got := serve(e, feed.New(tr, "fake", e.sid, cfg), att, nil)()
	_, _, closes, killed := tr.snapshot()
	if got.Code != 0 || got.Reason.Code != protocol.ReasonWriteTimeout.Code || got.Reason.StalledMS != 20 || got.Err == nil ||
		!killed || len(closes) != 0 {
		t.Fatalf("end %+v, closes %+v, killed %v", got, closes, killed)
	}
	if v := value(t, e.m.Closes.WithLabelValues("write_timeout")); v != 1 {
		t.Fatalf("write_timeout closes %v", v)
	}
}

// TestHeartbeats: an idle client gets heartbeats with fresh nonces;
// with PingMisses, that many unanswered end the feed with
// heartbeat_timeout and the count; without (SSE), heartbeats go on.
func TestHeartbeats(t *testing.T) {
	t.Run("answered by nobody", func(t *testing.T) {
		e := newEnv(t, hub.Config{})
		att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat})
		tr := newFake()
		cfg := e.config(quick)
		cfg.PingInterval, cfg.PingMisses = 5*time.Millisecond, 3
		got := serve(e, feed.New(tr, "fake", e.sid, cfg), att, nil)()
		_, beats, closes, _ := tr.snapshot()
		if got.Reason.Code != protocol.ReasonHeartbeatTimeout.Code || got.Reason.MissedPings != 3 || len(beats) != 3 ||
			len(closes) != 1 || closes[0].Code != 1008 {
			t.Fatalf("end %+v after heartbeats %v, closes %+v", got, beats, closes)
		}
		if beats[0] == beats[1] || beats[1] == beats[2] {
			t.Fatalf("nonces %v", beats)
		}
	})
	t.Run("never answered, never required", func(t *testing.T) {
		e := newEnv(t, hub.Config{})
		att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat})
		tr := newFake()
		cfg := e.config(quick)
		cfg.PingInterval = 5 * time.Millisecond
		shutdown := make(chan struct{})
		end := serve(e, feed.New(tr, "fake", e.sid, cfg), att, shutdown)
		tr.wait(t, "ten heartbeats", func(f *fake) bool { return len(f.beats) >= 10 })
		close(shutdown)
		if got := end(); got.Reason.Code != protocol.ReasonShutdown.Code {
			t.Fatalf("end %+v", got)
		}
	})
}

// receiver is a fake transport whose client sends frames.
type receiver struct {
	*fake
	in  chan feed.Inbound
	got chan feed.Inbound
	fd  *feed.Feed
}

func (r *receiver) Inbox() <-chan feed.Inbound { return r.in }

func (r *receiver) Receive(_ context.Context, in feed.Inbound) bool {
	r.got <- in
	if string(in.Data) == "pong" {
		r.fd.Pong()
	}
	return string(in.Data) != "bye"
}

// TestReceiver: client frames reach Receive on the feed's goroutine; a
// pong answers the heartbeats so far (the client is not dropped however
// many intervals pass); a false Receive ends the feed as a client gone.
func TestReceiver(t *testing.T) {
	e := newEnv(t, hub.Config{})
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat})
	r := &receiver{fake: newFake(), in: make(chan feed.Inbound), got: make(chan feed.Inbound, 16)}
	cfg := e.config(quick)
	cfg.PingInterval, cfg.PingMisses = 5*time.Millisecond, 2
	r.fd = feed.New(r, "fake", e.sid, cfg)
	end := serve(e, r.fd, att, nil)
	for beats := 0; beats < 6; {
		r.wait(t, "a heartbeat", func(f *fake) bool { return len(f.beats) > beats })
		_, bs, _, _ := r.snapshot()
		beats = len(bs)
		r.in <- feed.Inbound{Data: []byte("pong")}
		<-r.got
	}
	r.in <- feed.Inbound{Data: []byte("bye")}
	got := end()
	if got.Reason.Code != "" || got.Code != 0 {
		t.Fatalf("end %+v", got)
	}
}

// TestGone: a client that goes away ends the feed with no close and no
// close counted.
func TestGone(t *testing.T) {
	e := newEnv(t, hub.Config{})
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat})
	tr := newFake()
	end := serve(e, feed.New(tr, "fake", e.sid, e.config(quick)), att, nil)
	tr.wait(t, "the ack", func(f *fake) bool { return len(f.frames) == 1 })
	close(tr.gone)
	got := end()
	_, _, closes, _ := tr.snapshot()
	if got.Code != 0 || got.Reason.Code != "" || len(closes) != 0 {
		t.Fatalf("end %+v, closes %+v", got, closes)
	}
	if n := e.h.Clients(e.sid); n != 0 {
		t.Fatalf("%d clients attached", n)
	}
}

// TestResync: a resync (an event of the session was lost) closes the
// client with 1008 storage_failure, marked as a resync, without queue
// numbers; a client of a session whose tree moved to another node
// (cluster mode) gets owner_changed, and one of a tree with events that
// never reached this node resync.
func TestResync(t *testing.T) {
	for _, c := range []struct {
		resync func(h *hub.Hub, sid string)
		want   protocol.CloseReason
	}{
		{(*hub.Hub).Resync, protocol.ReasonStorageFailure},
		{(*hub.Hub).ResyncMoved, protocol.ReasonOwnerChanged},
		{func(h *hub.Hub, sid string) { h.Gap(sid, "evt_~") }, protocol.ReasonResync},
	} {
		e := newEnv(t, hub.Config{})
		att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat})
		tr := newFake()
		end := serve(e, feed.New(tr, "fake", e.sid, e.config(quick)), att, nil)
		tr.wait(t, "the ack", func(f *fake) bool { return len(f.frames) == 1 })
		c.resync(e.h, e.sid)
		got := end()
		if got.Reason != (protocol.CloseDetail{CloseReason: c.want}) || !got.Resync || got.Code != 1008 {
			t.Fatalf("end %+v, want %s", got, c.want.Code)
		}
	}
}

// value reads a counter or gauge.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("not a counter or gauge: %v", &m)
	return 0
}
