package streamtest

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metis-agent/metis/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 10 * time.Second

// Frames as the SSE edge writes them.
const (
	ackData   = `{"type":"subscribe_ack","resolved_filter":{"event_types":["turn.started"],"actors":null,"include_worker_sessions":false},"since":null,"snapshot":true,"replay_event_count":0,"streaming_gap":false,"seam_event_id":"evt_01J0000000000000000000000A"}`
	snapData  = `{"type":"snapshot","session":{},"messages":[],"has_more_messages":false,"snapshot_at_event_id":"evt_01J0000000000000000000000A"}`
	eventB    = `{"type":"event","event":{"id":"evt_01J0000000000000000000000B","type":"turn.started","session_id":"sess_1","turn_id":"turn_1","ts":"2026-05-08T14:23:11.000Z","actor":"user","payload":{}}}`
	eventC    = `{"type":"event","event":{"id":"evt_01J0000000000000000000000C","type":"made.up.thing","session_id":"sess_1","turn_id":null,"ts":"2026-05-08T14:23:11.001Z","actor":"future","payload":{}}}`
	eventD    = `{"type":"event","event":{"id":"evt_01J0000000000000000000000D","type":"turn.completed","session_id":"sess_1","turn_id":"turn_1","ts":"2026-05-08T14:23:11.002Z","actor":"session","payload":{}}}`
	closeData = `{"type":"close","code":1008,"reason":{"code":"client_too_slow","message":"Outbound queue overflowed; reconnect with replay."}}`
)

// stub is an SSE server playing a script, recording each request.
type stub struct {
	mu       sync.Mutex
	requests []*http.Request
	status   int    // answer with this status and body instead of a stream
	body     string // the stream, or the error body
}

func (s *stub) start(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Clone(r.Context()))
		status, body := s.status, s.body
		s.mu.Unlock()
		if status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (s *stub) last() *http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[len(s.requests)-1]
}

func sseEvent(id, data string) string {
	if id != "" {
		return "id: " + id + "\ndata: " + data + "\n\n"
	}
	return "data: " + data + "\n\n"
}

// TestSSEClientStream: the client reads the frames of a stream in order,
// takes retry: and comments in passing, skips an event of a type it does
// not know, follows the last event id, and reports the close event as
// the end with its code and reason.
func TestSSEClientStream(t *testing.T) {
	s := &stub{body: "retry: 2500\n\n" + sseEvent("", ackData) + sseEvent("evt_01J0000000000000000000000A", snapData) +
		": ping\n\n" + sseEvent("evt_01J0000000000000000000000B", eventB) + sseEvent("evt_01J0000000000000000000000C", eventC) +
		sseEvent("evt_01J0000000000000000000000D", eventD) + sseEvent("", closeData)}
	base := s.start(t)
	c := NewSSE(t, base, "sess_1", nil)
	c.Log = slog.New(slog.DiscardHandler)
	var conn Conn = c
	since := "evt_0"
	conn.Subscribe(protocol.Filter{EventTypes: []string{"turn.started", "turn.completed"}, IncludeWorkerSessions: true}, &since, true)
	if r := s.last(); r.URL.Path != "/sessions/sess_1/events" || r.URL.Query().Get("types") != "turn.started,turn.completed" ||
		r.URL.Query().Get("since") != since || r.URL.Query().Get("snapshot") != "true" || r.URL.Query().Get("include_worker_sessions") != "true" ||
		r.Header.Get("Last-Event-ID") != "" {
		t.Fatalf("request %s %v", r.URL, r.Header)
	}
	if f := conn.Read(wait); f.Ack == nil || f.ID != "" {
		t.Fatalf("want the ack, got %+v", f)
	}
	if f := conn.Read(wait); f.Snap == nil || f.ID != "evt_01J0000000000000000000000A" || conn.LastEventID() != f.ID {
		t.Fatalf("want the snapshot, got %+v", f)
	}
	evs := conn.Events(wait, UntilType("turn.completed", ""))
	if len(evs) != 2 || evs[0].ID != "evt_01J0000000000000000000000B" || evs[1].ID != "evt_01J0000000000000000000000D" {
		t.Fatalf("events %+v", evs)
	}
	if c.Skipped != 1 || c.Comments != 1 || c.LastComment != "ping" || c.Retry != 2500*time.Millisecond || conn.LastEventID() != evs[1].ID {
		t.Fatalf("skipped %d, comments %d %q, retry %v, last id %q", c.Skipped, c.Comments, c.LastComment, c.Retry, conn.LastEventID())
	}
	_, err := conn.TryRead(wait)
	end, ok := EndOf(err)
	if !ok || end.Code != 1008 || !strings.Contains(end.Reason, `"client_too_slow"`) || CloseStatus(err) != 1008 {
		t.Fatalf("end %+v (%v)", end, err)
	}
	if _, again := conn.TryRead(wait); again != err {
		t.Fatalf("a read after the end: %v", again)
	}

	// Resuming sends the same query and the last id.
	c.Resume()
	r := s.last()
	if r.Header.Get("Last-Event-ID") != evs[1].ID || r.URL.Query().Get("since") != since || r.URL.Query().Get("types") != "turn.started,turn.completed" {
		t.Fatalf("resume %s %v", r.URL, r.Header)
	}
	conn.Close()
}

// TestSSEClientRefusal: an error status with the JSON error body is the
// next frame, a subscribe_error with the status; a body that is not the
// JSON error body is an error.
func TestSSEClientRefusal(t *testing.T) {
	s := &stub{status: http.StatusGone, body: `{"error":{"code":"cursor_expired","message":"reconnect with snapshot=true"}}`}
	c := NewSSE(t, s.start(t), "sess_1", nil)
	c.Subscribe("preset:chat", nil, false)
	if q := s.last().URL.Query(); q.Get("preset") != "chat" || len(q) != 1 {
		t.Fatalf("query %v", q)
	}
	f := c.Read(wait)
	if f.Type != protocol.TypeSubscribeError || f.Status != http.StatusGone || f.Err.Code != protocol.CodeCursorExpired || f.Err.Message == "" {
		t.Fatalf("refusal %+v %+v", f, f.Err)
	}
	if _, err := c.TryRead(wait); err == nil {
		t.Fatal("a read after a refusal, with no stream open, succeeded")
	}

	for _, body := range []string{`not json`, `{"error":{}}`, `{"code":"x"}`} {
		resp := &http.Response{Status: "400 Bad Request", StatusCode: 400, Body: io.NopCloser(strings.NewReader(body)),
			Header: http.Header{"Content-Type": {"application/json"}}}
		if _, err := refusal(resp); err == nil {
			t.Errorf("%q taken for the JSON error body", body)
		}
	}
}

// TestSSEClientFraming: a read fails on a frame whose id: field is not
// the one its kind carries, on an event: field, on data after the close
// event, and a response that ends without a close event ends with
// ErrNoClose.
func TestSSEClientFraming(t *testing.T) {
	for name, tc := range map[string]struct {
		body string
		want string
	}{
		"event without id":    {sseEvent("", eventB), "id:"},
		"event with wrong id": {sseEvent("evt_01J0000000000000000000000X", eventB), "id:"},
		"ack with an id":      {sseEvent("evt_01J0000000000000000000000A", ackData), "id:"},
		"snapshot without":    {sseEvent("", snapData), "id:"},
		"named event":         {"event: close\n" + sseEvent("", closeData), "event:"},
		"after the close":     {sseEvent("", closeData) + sseEvent("evt_01J0000000000000000000000B", eventB), "after the close"},
		"no close":            {sseEvent("evt_01J0000000000000000000000B", eventB), ErrNoClose.Error()},
	} {
		t.Run(name, func(t *testing.T) {
			c := NewSSE(t, (&stub{body: tc.body}).start(t), "sess_1", nil)
			c.Subscribe(nil, nil, false)
			var err error
			for err == nil {
				_, err = c.TryRead(wait)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error about %q", err, tc.want)
			}
			if _, ok := EndOf(err); ok {
				t.Fatalf("%v taken for a clean end", err)
			}
		})
	}
}

// TestSSEClientCloseWhileReading: Close ends a stream the server keeps
// open, also while another goroutine waits in TryRead.
func TestSSEClientCloseWhileReading(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseEvent("", ackData))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	c := NewSSE(t, srv.URL, "sess_1", nil)
	c.Subscribe(nil, nil, false)
	if f := c.Read(wait); f.Ack == nil {
		t.Fatalf("want the ack, got %s", f.Raw)
	}
	errc := make(chan error, 1)
	go func() { _, err := c.TryRead(wait); errc <- err }()
	c.Close()
	if err := <-errc; err == nil || errors.Is(err, ErrNoClose) {
		t.Fatalf("read during Close: %v", err)
	}
}

// TestQuery: filters in the query string.
func TestQuery(t *testing.T) {
	since := "evt_1"
	for _, tc := range []struct {
		filter   any
		since    *string
		snapshot bool
		want     string
	}{
		{nil, nil, false, ""},
		{"preset:full", &since, false, "preset=full&since=evt_1"},
		{protocol.Filter{EventTypes: []string{}}, nil, true, "snapshot=true&types="},
		{protocol.Filter{Actors: []string{"tool", "user"}}, nil, false, "actors=tool%2Cuser"},
	} {
		if got := Query(tc.filter, tc.since, tc.snapshot).Encode(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.filter, got, tc.want)
		}
	}
	if u := (&SSEClient{Base: "http://h", SessionID: "sess_1"}).URL(url.Values{"preset": {"chat"}}); u != "http://h/sessions/sess_1/events?preset=chat" {
		t.Errorf("url %s", u)
	}
}
