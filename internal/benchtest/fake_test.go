package benchtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/benchtest"
)

// fakeMetis is as much of a metis server as the benchmarks' clients
// use: GET /sessions/{id} answering with a ws_url (404 for the first
// `late` attaches of a session, as a cluster node that has not applied
// it yet), a WebSocket stream that acks a subscribe with
// replay_event_count and writes the events, the same events over SSE,
// and a bare floor stream writing them on connect.
type fakeMetis struct {
	srv    *httptest.Server
	events int // event frames each stream writes
	extra  int // bytes of padding in every event frame

	mu   sync.Mutex
	late int              // attaches still answered 404
	subs []map[string]any // the subscribe frames received
}

func startFakeMetis(t *testing.T, events int) *fakeMetis {
	t.Helper()
	f := &fakeMetis{events: events}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sessions/{sid}", f.attach)
	mux.HandleFunc("GET /ws/{sid}", f.stream)
	mux.HandleFunc("GET /floor", f.floor)
	mux.HandleFunc("GET /sessions/{sid}/events", f.sse)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// eventFrame is event i: a text.delta carrying delta i's text, with a
// non-event frame before every third one.
func (f *fakeMetis) eventFrame(i int) string {
	return fmt.Sprintf(`{"type":"event","event":{"type":"text.delta","payload":{"text":%q,"pad":%q}}}`,
		benchtest.DeltaText(i), strings.Repeat("x", f.extra))
}

func (f *fakeMetis) attach(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("sid")
	f.mu.Lock()
	late := f.late > 0 || sid == "sess_missing"
	if f.late > 0 {
		f.late--
	}
	f.mu.Unlock()
	if late {
		http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"ws_url": "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/ws/" + sid})
}

func (f *fakeMetis) stream(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := r.Context()
	_, data, err := ws.Read(ctx)
	if err != nil {
		return
	}
	var sub map[string]any
	if json.Unmarshal(data, &sub) != nil {
		return
	}
	f.mu.Lock()
	f.subs = append(f.subs, sub)
	f.mu.Unlock()
	if r.PathValue("sid") == "sess_refused" {
		_ = ws.Write(ctx, websocket.MessageText, []byte(`{"type":"error","code":"bad_request"}`))
		return
	}
	ack := fmt.Sprintf(`{"type":"subscribe_ack","replay_event_count":%d}`, f.events)
	if ws.Write(ctx, websocket.MessageText, []byte(ack)) != nil {
		return
	}
	f.write(ws.CloseRead(ctx), ws)
}

func (f *fakeMetis) floor(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	f.write(ws.CloseRead(r.Context()), ws)
}

// write writes the events (and a heartbeat before every third), then
// waits until the client goes.
func (f *fakeMetis) write(ctx context.Context, ws *websocket.Conn) {
	for i := range f.events {
		if i%3 == 0 && ws.Write(ctx, websocket.MessageText, []byte(`{"type":"heartbeat"}`)) != nil {
			return
		}
		if ws.Write(ctx, websocket.MessageText, []byte(f.eventFrame(i))) != nil {
			return
		}
	}
	<-ctx.Done()
}

func (f *fakeMetis) sse(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: {\"type\":\"subscribe_ack\",\"replay_event_count\":%d}\n\n", f.events)
	for i := range f.events {
		fmt.Fprintf(w, ": keep-alive\n\nid: %d\ndata: %s\n\n", i, f.eventFrame(i))
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}
