package sse_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/metrics"
	"github.com/metis-agent/metis/internal/sse"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

const timeout = 20 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is one session on a real store, bus and hub, served over SSE by
// an httptest server.
type env struct {
	t      testing.TB
	ctx    context.Context
	h      *hub.Hub
	em     *bus.Emitter
	sid    string
	st     *store.Store
	m      *metrics.Stream
	srv    *sse.Server
	http   *httptest.Server
	client *http.Client
}

func newEnv(t testing.TB, hcfg hub.Config, scfg sse.Config) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	st, err := store.Open(ctx, store.Options{Path: filepath.Join(t.TempDir(), "trace.db"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b := bus.New(st, bus.Options{Logger: quiet})
	m := metrics.New().Stream
	hcfg.Logger, hcfg.Metrics = quiet, m
	if hcfg.RingSize == 0 {
		hcfg.RingSize = 1024
	}
	h := hub.New(st, b, hcfg)
	b.AddLive(h)
	scfg.Logger, scfg.Metrics = quiet, m
	srv := sse.New(h, scfg)
	mux := http.NewServeMux()
	mux.Handle("GET /sessions/{id}/events", srv)
	hs := httptest.NewServer(mux)
	tr := &http.Transport{}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := srv.Close(cctx); err != nil {
			t.Errorf("sse close: %v", err)
		}
		hs.Close()
		tr.CloseIdleConnections()
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
	return &env{t: t, ctx: ctx, h: h, em: em, sid: sid, st: st, m: m, srv: srv, http: hs, client: &http.Client{Transport: tr}}
}

func (e *env) emit(typ event.Type) *event.Event {
	e.t.Helper()
	ev, err := e.em.EmitWait(e.ctx, bus.Spec{Type: typ, Actor: event.ActorModel, Payload: map[string]string{"text": "x"}})
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

func (e *env) url(query string) string {
	u := e.http.URL + "/sessions/" + e.sid + "/events"
	if query != "" {
		u += "?" + query
	}
	return u
}

// get opens the stream; the response body is closed when the test ends.
func (e *env) get(query, lastEventID string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, e.url(query), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sseEvent is one event of the stream as a client parses it (the
// WHATWG rules: fields up to a blank line; comment lines start with a
// colon).
type sseEvent struct {
	id       string
	hasID    bool
	data     string
	retry    string
	comments []string
}

func (ev sseEvent) frame(t *testing.T) protocol.ServerFrame {
	t.Helper()
	f, err := protocol.DecodeServerFrame([]byte(ev.data))
	if err != nil {
		t.Fatalf("data %q: %v", ev.data, err)
	}
	return f
}

type reader struct {
	t *testing.T
	r *bufio.Reader
}

func newReader(t *testing.T, body io.Reader) *reader { return &reader{t: t, r: bufio.NewReader(body)} }

// next returns the next event (or run of comments); io.EOF at the end
// of the stream.
func (r *reader) next() (sseEvent, error) {
	var ev sseEvent
	var data []string
	seen := false
	for {
		line, err := r.r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && !seen && line == "" {
				return ev, io.EOF
			}
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if seen {
				ev.data = strings.Join(data, "\n")
				return ev, nil
			}
			continue
		}
		seen = true
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "":
			ev.comments = append(ev.comments, value)
		case "id":
			ev.id, ev.hasID = value, true
		case "data":
			data = append(data, value)
		case "retry":
			ev.retry = value
		default:
			r.t.Fatalf("unexpected field %q", line)
		}
	}
}

func (r *reader) mustNext() sseEvent {
	r.t.Helper()
	ev, err := r.next()
	if err != nil {
		r.t.Fatalf("reading the stream: %v", err)
	}
	return ev
}

// frames reads events up to and including the first of type typ.
func (r *reader) until(typ string) []sseEvent {
	r.t.Helper()
	var out []sseEvent
	for {
		ev := r.mustNext()
		out = append(out, ev)
		if ev.data != "" && ev.frame(r.t).Type == typ {
			return out
		}
	}
}

func errorOf(t *testing.T, resp *http.Response) (status int, code, msg string) {
	t.Helper()
	var b struct {
		Error struct{ Code, Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatalf("status %d: body is not the JSON error: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, b.Error.Code, b.Error.Message
}
