package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/model"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/tool"
)

// wedge is a piece that ignores every cancellation until released.
type wedge struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newWedge() *wedge { return &wedge{entered: make(chan struct{}), release: make(chan struct{})} }

func (w *wedge) block() {
	w.once.Do(func() { close(w.entered) })
	<-w.release
}

func (w *wedge) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-w.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the wedged piece was never reached")
	}
}

// wedgedTool blocks its call, ignoring ctx, until released.
type wedgedTool struct{ w *wedge }

func (wedgedTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "wedged", InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (t wedgedTool) Run(context.Context, tool.Env, json.RawMessage) (tool.Result, error) {
	t.w.block()
	return tool.Result{Content: "released"}, nil
}

// wedgedSink blocks the store's commit path (live sinks are called as
// events commit) from the first tool.called on, ignoring everything.
type wedgedSink struct{ w *wedge }

func (s wedgedSink) Publish(ev *event.Event) {
	if ev.Type == event.ToolCalled {
		s.w.block()
	}
}

// startUnmanaged starts a server on builtin:demo like servertest.Start,
// but leaves its shutdown to the test (the harness's cleanup would
// report the deadline error these tests expect).
func startUnmanaged(t *testing.T, opts ...servertest.Option) *servertest.Harness {
	t.Helper()
	home := t.TempDir()
	cfg := config.Defaults()
	cfg.Home, cfg.Addr, cfg.DemoDelay, cfg.DefaultModel = home, "127.0.0.1:0", 0, "builtin:demo"
	cfg.DefaultMode, cfg.ShellSandbox = permission.ModeAuto, permission.SandboxDisabled // as servertest.Start
	for _, o := range opts {
		o(&cfg)
	}
	ws := filepath.Join(home, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	srv, err := server.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	rec := servertest.NewRecorder()
	srv.Bus.AddLive(rec)
	url, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	return &servertest.Harness{T: t, Server: srv, URL: url, Home: home, Workspace: ws, Live: rec, Config: cfg}
}

// shutdownWithin shuts h down with a deadline and fails the test if
// Shutdown has not returned well after it (a hang), returning its error.
func shutdownWithin(t *testing.T, h *servertest.Harness, deadline time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.Server.Shutdown(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(deadline + 30*time.Second):
		t.Fatal("Shutdown did not return after its deadline: a wait is not bounded")
		return nil
	}
}

// TestShutdownBoundedWithWedgedPieces: a shutdown whose pieces do not
// finish (a tool ignoring its cancellation, a bus subscriber ignoring
// its context, a live sink blocking the store's writer) still returns,
// with an error saying what did not finish, while the piece is still
// wedged.
func TestShutdownBoundedWithWedgedPieces(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *servertest.Harness, w *wedge)
		want  string
	}{
		{"tool ignoring cancellation", func(h *servertest.Harness, w *wedge) {
			h.Server.Tools.Register(wedgedTool{w})
		}, "sessions"},
		{"bus subscriber ignoring its context", func(h *servertest.Harness, w *wedge) {
			h.Server.Bus.Subscribe("wedged", func(context.Context, *event.Event) error { w.block(); return nil }, bus.SubscribeOptions{Types: []event.Type{event.ToolCalled}})
		}, "bus close"},
		{"store writer blocked", func(h *servertest.Harness, w *wedge) {
			h.Server.Bus.AddLive(wedgedSink{w})
		}, "store close"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := startUnmanaged(t)
			w := newWedge()
			released := false
			release := func() {
				if !released {
					released = true
					close(w.release)
				}
			}
			defer release()
			c.setup(h, w)
			sid := h.CreateSession()
			h.Submit(sid, `/tool wedged {}`)
			w.waitEntered(t)

			err := shutdownWithin(t, h, 500*time.Millisecond)
			select {
			case <-w.release:
				t.Fatal("the piece was released before Shutdown returned")
			default:
			}
			if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Shutdown error %v; want a deadline error naming %q", err, c.want)
			}
			// Let the wedged piece go, so nothing outlives the test.
			release()
			servertest.WaitFor(t, "the turn to end", func() bool {
				return h.Server.Sessions.Wait(context.Background(), sid) == nil
			})
		})
	}
}

// TestShutdownWithTermIgnoringShellAndFIFOPolicy: a shell command that
// ignores SIGTERM and a routing.yaml replaced by a FIFO do not hold the
// shutdown: the poller never blocks on the FIFO, and the command is
// killed after the grace period.
func TestShutdownWithTermIgnoringShellAndFIFOPolicy(t *testing.T) {
	h := startUnmanaged(t, func(cfg *config.Config) { cfg.RoutingPoll = 5 * time.Millisecond })
	policy := filepath.Join(h.Home, "routing.yaml")
	if err := syscall.Mkfifo(policy, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Let the poller meet the FIFO a few times.
	v := h.Server.Router.Version()
	time.Sleep(50 * time.Millisecond)
	if h.Server.Router.Version() != v {
		t.Fatal("a FIFO changed the policy")
	}
	sid := h.CreateSession()
	h.Submit(sid, `/tool shell {"command": "trap '' TERM; echo $$ > pid; while :; do sleep 0.05; done"}`)
	servertest.WaitFor(t, "the command to start", func() bool {
		_, err := readFile(h.Workspace, "pid")
		return err == nil
	})
	pid, _ := readFile(h.Workspace, "pid")
	if err := shutdownWithin(t, h, 20*time.Second); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if processAlive(pid) {
		t.Fatalf("the command %s outlived the shutdown", pid)
	}
	if _, err := os.Stat(policy); err != nil {
		t.Fatal(err)
	}
}
