package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/model"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeServer is an OpenAI-compatible test server. Request n is answered
// by handlers[n] (the last handler answers the rest); it records every
// request body and header.
type fakeServer struct {
	*httptest.Server
	mu       sync.Mutex
	handlers []http.HandlerFunc
	bodies   [][]byte
	headers  []http.Header
	paths    []string
}

func newServer(t testing.TB, handlers ...http.HandlerFunc) *fakeServer {
	t.Helper()
	fs := &fakeServer{handlers: handlers}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fs.mu.Lock()
		n := len(fs.bodies)
		fs.bodies = append(fs.bodies, body)
		fs.headers = append(fs.headers, r.Header.Clone())
		fs.paths = append(fs.paths, r.URL.Path)
		fs.mu.Unlock()
		h := fs.handlers[min(n, len(fs.handlers)-1)]
		h(w, r)
	}))
	t.Cleanup(fs.Close)
	return fs
}

func (fs *fakeServer) requests() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.bodies)
}

// body returns request n's JSON body, decoded.
func (fs *fakeServer) body(t *testing.T, n int) map[string]any {
	t.Helper()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var m map[string]any
	if err := json.Unmarshal(fs.bodies[n], &m); err != nil {
		t.Fatalf("request body %q: %v", fs.bodies[n], err)
	}
	return m
}

// adapter returns an adapter talking to fs, with fast retries and its
// own HTTP client, closed at cleanup.
func (fs *fakeServer) adapter(t testing.TB, mod func(*Options)) *Adapter {
	t.Helper()
	o := Options{
		APIKey:      "sk-test",
		BaseURL:     fs.URL + "/v1",
		HTTPClient:  testClient(t),
		IdleTimeout: 5 * time.Second,
		Retry:       model.RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: 200 * time.Millisecond},
		Logger:      quietLogger(),
	}
	if mod != nil {
		mod(&o)
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func testClient(t testing.TB) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// events reads a recorded stream and splits it into its SSE events
// (each with its trailing blank line).
func events(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range strings.SplitAfter(string(b), "\n\n") {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// writeEvent writes one event in two flushed halves, cut mid-line (and
// possibly mid-rune), as TCP may deliver it.
func writeEvent(w http.ResponseWriter, e string) {
	f := w.(http.Flusher)
	cut := len(e) / 2
	_, _ = io.WriteString(w, e[:cut])
	f.Flush()
	_, _ = io.WriteString(w, e[cut:])
	f.Flush()
}

// replay serves a recorded stream.
func replay(t *testing.T, name string) http.HandlerFunc {
	evs := events(t, name)
	return serveEvents(evs...)
}

func serveEvents(evs ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		startSSE(w)
		for _, e := range evs {
			writeEvent(w, e)
		}
	}
}

// holdEvents serves evs, then keeps the stream open until the client
// goes away; reached is closed once evs are written, gone once the
// handler saw r.Context().Done().
type holder struct {
	reached, gone chan struct{}
}

func newHolder() *holder { return &holder{reached: make(chan struct{}), gone: make(chan struct{})} }

func (h *holder) handler(evs ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		startSSE(w)
		for _, e := range evs {
			writeEvent(w, e)
		}
		close(h.reached)
		<-r.Context().Done()
		close(h.gone)
	}
}

func (h *holder) waitGone(t *testing.T) {
	t.Helper()
	select {
	case <-h.gone:
	case <-time.After(3 * time.Second):
		t.Fatal("the server never saw the client go away")
	}
}

func serveStatus(status int, header map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// dataEvent is one SSE data event.
func dataEvent(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return "data: " + string(b) + "\n\n"
}

const doneEvent = "data: [DONE]\n\n"

// textChunk is a minimal OpenAI chunk carrying content.
func textChunk(s string) string {
	return dataEvent(map[string]any{"id": "chatcmpl-t", "object": "chat.completion.chunk", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": s}, "finish_reason": nil}}})
}

// run streams req and collects the deltas, also into an Accumulator.
func run(t *testing.T, a *Adapter, ctx context.Context, req model.Request) ([]model.Delta, model.Result, *model.Accumulator, error) {
	t.Helper()
	var got []model.Delta
	acc := &model.Accumulator{}
	res, err := a.Stream(ctx, req, func(d model.Delta) error {
		got = append(got, d)
		if err := acc.Apply(d); err != nil {
			t.Errorf("accumulator rejected %+v: %v", d, err)
		}
		return nil
	})
	return got, res, acc, err
}

func simpleReq() model.Request {
	return model.Request{Model: "openai:gpt-4.1", Messages: []message.Message{userMsg("hi")}, MaxTokens: 1024}
}

func userMsg(s string) message.Message {
	return message.Message{Role: message.RoleUser, Content: []message.Block{message.Text(s)}}
}

func asModelError(t *testing.T, err error) *model.Error {
	t.Helper()
	var me *model.Error
	if !errors.As(err, &me) {
		t.Fatalf("error %T %v; want *model.Error", err, err)
	}
	return me
}

func deltasString(ds []model.Delta) string {
	var b bytes.Buffer
	for _, d := range ds {
		fmt.Fprintf(&b, "%+v\n", d)
	}
	return b.String()
}
