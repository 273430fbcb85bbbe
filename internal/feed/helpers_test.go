package feed_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/feed"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// timeout bounds every wait; nothing should come near it.
const timeout = 20 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is one session on a real store, bus and hub.
type env struct {
	t   *testing.T
	ctx context.Context
	h   *hub.Hub
	em  *bus.Emitter
	sid string
	m   *metrics.Stream
}

func newEnv(t *testing.T, cfg hub.Config) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	st, err := store.Open(ctx, store.Options{Path: filepath.Join(t.TempDir(), "trace.db"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b := bus.New(st, bus.Options{Logger: quiet})
	m := metrics.New().Stream
	cfg.Logger, cfg.Metrics = quiet, m
	cfg.RingSize = 1024 // deltas are replayed from the ring
	h := hub.New(st, b, cfg)
	b.AddLive(h)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := b.Close(cctx); err != nil {
			t.Errorf("bus close: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("store close: %v", err)
		}
	})
	sid := event.NewID("sess_")
	if err := st.Apply(ctx, store.CreateSession{Session: store.Session{ID: sid, WorkspacePath: "/w", ActiveModel: "test:model",
		RoutingPolicyVersion: "v1", CreatedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	em, err := b.Emitter(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, h: h, em: em, sid: sid, m: m}
}

func (e *env) emit(typ event.Type, payload any) *event.Event {
	e.t.Helper()
	if payload == nil {
		payload = map[string]string{"text": "x"}
	}
	ev, err := e.em.EmitWait(e.ctx, bus.Spec{Type: typ, Actor: event.ActorModel, Payload: payload})
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

func (e *env) subscribe(sub protocol.Subscribe) *hub.Attachment {
	e.t.Helper()
	att, serr := e.h.Subscribe(e.ctx, e.sid, &sub)
	if serr != nil {
		e.t.Fatalf("subscribe: %s: %s", serr.Code, serr.Message)
	}
	return att
}

// written is one frame as the transport got it.
type written struct {
	cursor string
	frame  protocol.ServerFrame
}

var errKilled = errors.New("fake: killed")

// fake is a Transport that records what it is sent. stall makes every
// Write after the first `stallAfter` frames block until Kill.
type fake struct {
	mu         sync.Mutex
	frames     []written
	beats      []string
	closes     []protocol.CloseFrame
	flushes    int
	stallAfter int // -1: never stall
	killed     bool
	stalled    int // writes blocked by stallAfter
	kill       chan struct{}
	gone       chan struct{}
	changed    chan struct{} // signalled on every record
}

func newFake() *fake {
	return &fake{stallAfter: -1, kill: make(chan struct{}), gone: make(chan struct{}), changed: make(chan struct{}, 1)}
}

func (f *fake) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fake) Write(cursor string, frame []byte) error {
	f.mu.Lock()
	stall := f.stallAfter >= 0 && len(f.frames) >= f.stallAfter
	if stall {
		f.stalled++
		f.signal()
	}
	f.mu.Unlock()
	if stall {
		<-f.kill
		return errKilled
	}
	fr, err := protocol.DecodeServerFrame(frame)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.killed {
		return errKilled
	}
	f.frames = append(f.frames, written{cursor, fr})
	f.signal()
	return nil
}

func (f *fake) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushes++
	if f.killed {
		return errKilled
	}
	return nil
}

func (f *fake) Heartbeat(nonce string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.killed {
		return errKilled
	}
	f.beats = append(f.beats, nonce)
	f.signal()
	return nil
}

func (f *fake) Close(code int, r protocol.CloseDetail) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.killed {
		return errKilled
	}
	f.closes = append(f.closes, protocol.CloseFrame{Type: protocol.TypeClose, Code: code, Reason: r})
	return nil
}

func (f *fake) Kill() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.killed {
		f.killed = true
		close(f.kill)
	}
}

func (f *fake) Gone() <-chan struct{} { return f.gone }

// wait waits until cond holds (checked under the lock).
func (f *fake) wait(t *testing.T, what string, cond func(*fake) bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		ok := cond(f)
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-f.changed:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			f.mu.Lock()
			t.Fatalf("timed out waiting for %s: frames %+v beats %v closes %+v killed %v", what, f.frames, f.beats, f.closes, f.killed)
		}
	}
}

func (f *fake) snapshot() ([]written, []string, []protocol.CloseFrame, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]written(nil), f.frames...), append([]string(nil), f.beats...),
		append([]protocol.CloseFrame(nil), f.closes...), f.killed
}

// serve runs Serve on a goroutine; the returned function waits for its
// End.
func serve(e *env, fd *feed.Feed, att *hub.Attachment, shutdown <-chan struct{}) func() feed.End {
	done := make(chan feed.End, 1)
	go func() { done <- fd.Serve(e.ctx, e.h, att, shutdown) }()
	return func() feed.End {
		e.t.Helper()
		select {
		case end := <-done:
			fd.Stop()
			return end
		case <-time.After(timeout):
			e.t.Fatal("Serve did not return")
			return feed.End{}
		}
	}
}
