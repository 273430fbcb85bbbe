package anthropic

import (
	"context"
	"encoding/json"
	"errors"
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

// fake is an Anthropic API stand-in: it records every request and answers
// with handler (n is the 1-based number of the request).
type fake struct {
	t       testing.TB
	srv     *httptest.Server
	handler func(n int, w http.ResponseWriter, r *http.Request)

	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header

	// disconnects receives the number of each request whose client went
	// away while the handler was waiting in hang.
	disconnects chan int
}

func newFake(t testing.TB, handler func(n int, w http.ResponseWriter, r *http.Request)) *fake {
	f := &fake{t: t, handler: handler, disconnects: make(chan int, 16)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.headers = append(f.headers, r.Header.Clone())
		n := len(f.bodies)
		f.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusTeapot)
			return
		}
		f.handler(n, w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

// body returns request i (0-based) as parsed JSON.
func (f *fake) body(i int) map[string]any {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var m map[string]any
	if err := json.Unmarshal(f.bodies[i], &m); err != nil {
		f.t.Fatalf("request %d body: %v\n%s", i, err, f.bodies[i])
	}
	return m
}

// hang blocks until the client disconnects, and reports it on
// disconnects; it gives up after 5s (the test then fails on the channel).
func (f *fake) hang(n int, r *http.Request) {
	select {
	case <-r.Context().Done():
		f.disconnects <- n
	case <-time.After(5 * time.Second):
	}
}

// sawDisconnect fails the test unless request n's client went away.
func (f *fake) sawDisconnect(t *testing.T, n int) {
	t.Helper()
	select {
	case got := <-f.disconnects:
		if got != n {
			t.Fatalf("disconnect of request %d, want %d", got, n)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("the server never saw request %d's client disconnect", n)
	}
}

// loadSSE reads testdata/name.
func loadSSE(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sseEvents splits an SSE script into its events, each with its blank line.
func sseEvents(script string) []string {
	var out []string
	for _, e := range strings.Split(script, "\n\n") {
		if strings.TrimSpace(e) != "" {
			out = append(out, e+"\n\n")
		}
	}
	return out
}

// sseHeaders starts an event-stream answer.
func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", "req_test_1")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// writeEvents writes events one by one, flushing each.
func writeEvents(w http.ResponseWriter, events []string) {
	for _, e := range events {
		if _, err := io.WriteString(w, e); err != nil {
			return
		}
		w.(http.Flusher).Flush()
	}
}

// serveSSE answers every request with the whole script.
func serveSSE(script string) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		sseHeaders(w)
		writeEvents(w, sseEvents(script))
	}
}

// apiErrorAnswer writes an Anthropic JSON error answer.
func apiErrorAnswer(w http.ResponseWriter, status int, typ, msg string, hdr map[string]string) {
	for k, v := range hdr {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_err_1")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	w.Write(b)
}

var quiet = slog.New(slog.DiscardHandler)

// fastRetry keeps retried tests quick.
var fastRetry = model.RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: 20 * time.Millisecond}

func newAdapter(t testing.TB, f *fake, mod func(*Options)) *Adapter {
	t.Helper()
	o := Options{APIKey: "sk-ant-test", BaseURL: f.srv.URL, HTTPClient: f.srv.Client(),
		IdleTimeout: 3 * time.Second, Retry: fastRetry, Logger: quiet}
	if mod != nil {
		mod(&o)
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func simpleRequest() model.Request {
	return model.Request{Model: "anthropic:claude-sonnet-4-6",
		Messages: []message.Message{{Role: message.RoleUser, Content: []message.Block{message.Text("hi")}}}}
}

// outcome is what one Stream call produced.
type outcome struct {
	deltas  []model.Delta
	acc     model.Accumulator
	accErr  error
	res     model.Result
	err     error
	elapsed time.Duration
}

// run calls Stream, feeding every delta to an Accumulator (as the agent
// does); hook, when set, runs after each delta with its 1-based number.
func run(ctx context.Context, a *Adapter, req model.Request, hook func(n int, d model.Delta) error) *outcome {
	o := &outcome{}
	start := time.Now()
	o.res, o.err = a.Stream(ctx, req, func(d model.Delta) error {
		o.deltas = append(o.deltas, d)
		if err := o.acc.Apply(d); err != nil && o.accErr == nil {
			o.accErr = err
		}
		if hook != nil {
			return hook(len(o.deltas), d)
		}
		return nil
	})
	o.elapsed = time.Since(start)
	return o
}

// classOf returns the class and retryability of a returned error.
func classOf(err error) (string, bool) {
	var me *model.Error
	if !errors.As(err, &me) {
		c, _ := model.Classify(err)
		return c, false
	}
	return me.Class, me.Retryable
}

// jsonEqual compares two JSON texts as parsed values.
func jsonEqual(t testing.TB, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %q: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return string(gb) == string(wb)
}
