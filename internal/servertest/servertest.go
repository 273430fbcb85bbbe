// Package servertest starts real metis servers on loopback for tests and
// benchmarks, with small helpers to call the HTTP API and to record
// everything the bus delivers live. A server a test must be able to
// kill with SIGKILL, or pause, runs in a child process instead
// (StartChild, child.go).
//
// It imports server and the core packages; only tests import it.
package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/permission"
	"github.com/metis-agent/metis/internal/server"
	"github.com/metis-agent/metis/internal/token"
)

// Harness is one running server.
type Harness struct {
	T         testing.TB
	Server    *server.Server
	URL       string
	Home      string
	Workspace string
	Live      *Recorder
	Config    config.Config
	// Token is the server's bearer token when it requires one; Do sends
	// it. HTTP trusts the server's certificate under TLS.
	Token string
	HTTP  *http.Client
}

// Option adjusts the configuration before start.
type Option func(*config.Config)

// Start starts a server with a fresh home (or the given one, to test
// restarts) and a workspace holding a few files. It is shut down when
// the test ends.
func Start(t testing.TB, home string, opts ...Option) *Harness {
	t.Helper()
	return StartLogged(t, home, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), opts...)
}

// StartLogged is Start with the server logging to log.
func StartLogged(t testing.TB, home string, log *slog.Logger, opts ...Option) *Harness {
	t.Helper()
	if home == "" {
		home = t.TempDir()
	}
	cfg := config.Defaults()
	cfg.Home = home
	cfg.Addr = "127.0.0.1:0"
	cfg.DemoDelay = 0
	// Tests of everything but permissions run their tools unasked, as
	// before permissions existed: auto mode, the sandbox off. Tests of
	// permissions set the mode (and the sandbox) they test.
	cfg.DefaultMode, cfg.ShellSandbox = permission.ModeAuto, permission.SandboxDisabled
	for _, o := range opts {
		o(&cfg)
	}
	ws := filepath.Join(home, "workspace")
	if err := os.MkdirAll(filepath.Join(ws, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"README.md", "main.go"} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte("content of "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := server.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder()
	srv.Bus.AddLive(rec)
	url, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	h := &Harness{T: t, Server: srv, URL: url, Home: home, Workspace: ws, Live: rec, Config: cfg, HTTP: http.DefaultClient}
	if tf := cfg.TokenFile; tf != "" || cfg.PublicName != "" {
		if tf == "" {
			tf = filepath.Join(home, token.FileName)
		}
		if h.Token, err = token.Read(tf); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.TLSCert != "" {
		h.HTTP = TLSClient(t, cfg.TLSCert)
	}
	t.Cleanup(func() { h.Stop() })
	return h
}

// Stop shuts the server down (idempotent).
func (h *Harness) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Server.Shutdown(ctx); err != nil {
		h.T.Errorf("shutdown: %v", err)
	}
}

// RequestTimeout bounds each request of Do, the answer's body read
// included: generous, for a loaded machine, and far below a package's
// test timeout.
const RequestTimeout = 2 * time.Minute

// Do sends a JSON request and decodes a JSON answer into out (if not
// nil), returning the status.
func (h *Harness) Do(method, path string, body any, out any) int {
	h.T.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			h.T.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	// A server that never answers fails the test rather than hanging
	// it until the package's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.URL+path, rd)
	if err != nil {
		h.T.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.Token)
	}
	hc := h.HTTP
	if hc == nil {
		hc = http.DefaultClient // a Harness built by hand
	}
	resp, err := hc.Do(req)
	if err != nil {
		h.T.Fatalf("%s %s: %v (a request is given %s)", method, path, err, RequestTimeout)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if ctx.Err() != nil {
		h.T.Fatalf("%s %s: the answer did not end within %s", method, path, RequestTimeout)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			h.T.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

// CreateSession creates a session on the harness workspace.
func (h *Harness) CreateSession() string {
	h.T.Helper()
	var s struct {
		ID string `json:"id"`
	}
	if st := h.Do("POST", "/sessions", map[string]string{"workspace_path": h.Workspace}, &s); st != http.StatusCreated {
		h.T.Fatalf("create session: status %d", st)
	}
	return s.ID
}

// Submit starts a turn and returns its id.
func (h *Harness) Submit(sessionID, content string) string {
	h.T.Helper()
	var r struct {
		TurnID string `json:"turn_id"`
	}
	if st := h.Do("POST", "/sessions/"+sessionID+"/turns", map[string]string{"content": content}, &r); st != http.StatusAccepted {
		h.T.Fatalf("submit turn: status %d", st)
	}
	return r.TurnID
}

// WaitTurn waits until the session has no turn in flight.
func (h *Harness) WaitTurn(sessionID string) {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Server.Sessions.Wait(ctx, sessionID); err != nil {
		h.T.Fatalf("turn did not end: %v", err)
	}
	// Let the terminal event reach the live recorder.
	if em, ok := h.Server.Bus.Lookup(sessionID); ok {
		if err := em.Barrier(ctx); err != nil {
			h.T.Fatal(err)
		}
	}
}

// Recorder is a bus.LiveSink that keeps every delivered event.
type Recorder struct {
	mu  sync.Mutex
	evs map[string][]*event.Event
	ch  chan struct{}
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{evs: map[string][]*event.Event{}, ch: make(chan struct{}, 1)}
}

// Publish implements bus.LiveSink.
func (r *Recorder) Publish(ev *event.Event) {
	r.mu.Lock()
	r.evs[ev.SessionID] = append(r.evs[ev.SessionID], ev)
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

// Events returns what the session delivered so far.
func (r *Recorder) Events(sessionID string) []*event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*event.Event(nil), r.evs[sessionID]...)
}

// Types lists event types.
func Types(evs []*event.Event) []event.Type {
	out := make([]event.Type, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// WaitFor polls cond until it holds or 10 s pass.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Must fails the test on err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(fmt.Errorf("unexpected: %w", err))
	}
}
