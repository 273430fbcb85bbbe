package sse_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/sse"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// TestStream: the response is an open event stream (200, its headers);
// a retry field comes first, then the ack (no id), the replayed events
// and live events, one SSE event per frame, each event with its id; on
// shutdown the stream ends with a close frame carrying 1001 and
// server_shutdown, then the response ends.
func TestStream(t *testing.T) {
	e := newEnv(t, hub.Config{}, sse.Config{})
	first := e.emit(event.TextDelta)
	replayed := []string{e.emit(event.TextDelta).ID, e.emit(event.TextDelta).ID}
	resp := e.get("types=text.delta&since="+first.ID, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	r := newReader(t, resp.Body)
	if ev := r.mustNext(); ev.retry != "2000" || ev.data != "" || ev.hasID {
		t.Fatalf("first event %+v, want the retry field alone", ev)
	}
	ack := r.mustNext()
	if f := ack.frame(t); f.Type != protocol.TypeSubscribeAck || ack.hasID || f.Ack.ReplayEventCount != 2 || *f.Ack.Since != first.ID {
		t.Fatalf("ack %+v", ack)
	}
	for _, id := range replayed {
		ev := r.mustNext()
		if f := ev.frame(t); f.Type != protocol.TypeEvent || f.Event.ID != id || ev.id != id {
			t.Fatalf("replayed %+v, want %s", ev, id)
		}
	}
	live := e.emit(event.TextDelta)
	if ev := r.mustNext(); ev.id != live.ID || ev.frame(t).Event.ID != live.ID {
		t.Fatalf("live %+v, want %s", ev, live.ID)
	}
	if err := e.srv.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	end := r.mustNext()
	f := end.frame(t)
	if f.Type != protocol.TypeClose || f.Close.Code != protocol.CloseGoingAway || f.Close.Reason.Code != protocol.ReasonShutdown.Code ||
		f.Close.Reason.Message == "" || end.hasID {
		t.Fatalf("last event %+v", end)
	}
	if ev, err := r.next(); err == nil {
		t.Fatalf("after the close frame: %+v", ev)
	}
	// A server that is closing refuses new streams.
	if status, code, _ := errorOf(t, e.get("", "")); status != http.StatusServiceUnavailable || code != "shutting_down" {
		t.Fatalf("after Close: %d %s", status, code)
	}
}

// TestLastEventIDOverridesSince: a Last-Event-ID header wins over
// ?since= and ?snapshot=true: the client resumes right after it.
func TestLastEventIDOverridesSince(t *testing.T) {
	e := newEnv(t, hub.Config{}, sse.Config{})
	var ids []string
	for range 4 {
		ids = append(ids, e.emit(event.TextDelta).ID)
	}
	r := newReader(t, e.get("types=text.delta&snapshot=true&since="+ids[0], ids[2]).Body)
	evs := r.until(protocol.TypeSubscribeAck)
	f := evs[len(evs)-1].frame(t)
	if f.Ack.Snapshot || f.Ack.Since == nil || *f.Ack.Since != ids[2] || f.Ack.ReplayEventCount != 1 {
		t.Fatalf("ack %+v", f.Ack)
	}
	if ev := r.mustNext(); ev.id != ids[3] {
		t.Fatalf("replayed %+v, want %s only", ev, ids[3])
	}
}

// TestResumeExactlyOnce: a client that drops after any event and
// reconnects with that event's id as Last-Event-ID gets every later
// event once: what it had and what it gets are the whole stream.
func TestResumeExactlyOnce(t *testing.T) {
	e := newEnv(t, hub.Config{}, sse.Config{})
	start := e.emit(event.TextDelta).ID
	var all []string
	for range 6 {
		all = append(all, e.emit(event.TextDelta).ID)
	}
	for k := 1; k < len(all); k++ {
		ctx, cancel := context.WithCancel(e.ctx)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url("types=text.delta&since="+start), nil)
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r := newReader(t, resp.Body)
		r.until(protocol.TypeSubscribeAck)
		var got []string
		for len(got) < k {
			got = append(got, r.mustNext().id)
		}
		cancel() // the client drops
		resp.Body.Close()
		r = newReader(t, e.get("types=text.delta&since="+start, got[k-1]).Body)
		evs := r.until(protocol.TypeSubscribeAck)
		n := evs[len(evs)-1].frame(t).Ack.ReplayEventCount
		for range n {
			got = append(got, r.mustNext().id)
		}
		if strings.Join(got, ",") != strings.Join(all, ",") {
			t.Fatalf("dropped after %d: got %v, want %v", k, got, all)
		}
	}
}

// TestSnapshot: with ?snapshot=true the ack is followed by the snapshot,
// whose id is its snapshot_at_event_id.
func TestSnapshot(t *testing.T) {
	e := newEnv(t, hub.Config{SnapshotMessages: 10}, sse.Config{})
	e.emit(event.TextDelta)
	r := newReader(t, e.get("snapshot=true&preset=chat", "").Body)
	r.until(protocol.TypeSubscribeAck)
	snap := r.mustNext()
	f := snap.frame(t)
	if f.Type != protocol.TypeSnapshot || !snap.hasID || snap.id != f.Snapshot.SnapshotAtEventID || snap.id == "" {
		t.Fatalf("snapshot event %+v", snap)
	}
}

// TestRefusals: a subscribe refused before the stream opens is an HTTP
// error with the JSON error body, the subscribe_error's code and a
// fitting status; the refusals a snapshot gets over say so.
func TestRefusals(t *testing.T) {
	e := newEnv(t, hub.Config{ReplayLimit: 2, Retention: time.Hour}, sse.Config{})
	first := e.emit(event.TextDelta)
	for range 3 {
		e.emit(event.TextDelta)
	}
	old := event.IDPrefix + ulid.MustNew(ulid.Timestamp(time.Now().Add(-48*time.Hour)), rand.Reader).String()
	cases := []struct {
		name, path, query, lastEventID string
		status                         int
		code                           string
		snapshotHint                   bool
	}{
		{"bad flag", "", "snapshot=maybe", "", 400, "invalid_request", false},
		{"preset and types", "", "preset=chat&types=text.delta", "", 400, "invalid_request", false},
		{"unknown type", "", "types=text.delta,nope", "", 400, protocol.CodeInvalidFilter, false},
		{"empty types", "", "types=", "", 400, protocol.CodeInvalidFilter, false},
		{"unknown preset", "", "preset=loud", "", 400, protocol.CodeInvalidFilter, false},
		{"not a cursor", "", "since=yesterday", "", 400, protocol.CodeInvalidCursor, true},
		{"bad Last-Event-ID", "", "", "yesterday", 400, protocol.CodeInvalidCursor, true},
		{"expired", "", "since=" + old, "", 410, protocol.CodeCursorExpired, true},
		{"too large", "", "types=text.delta&since=" + first.ID, "", 409, protocol.CodeReplayTooLarge, true},
		{"no session", "/sessions/sess_nope/events", "", "", 404, protocol.CodeSessionNotFound, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := e.url(c.query)
			if c.path != "" {
				url = e.http.URL + c.path
			}
			req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, url, nil)
			if c.lastEventID != "" {
				req.Header.Set("Last-Event-ID", c.lastEventID)
			}
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			status, code, msg := errorOf(t, resp)
			if status != c.status || code != c.code || msg == "" {
				t.Fatalf("%d %s %q; want %d %s", status, code, msg, c.status, c.code)
			}
			if c.snapshotHint != strings.Contains(msg, "snapshot=true") {
				t.Fatalf("message %q", msg)
			}
		})
	}
	if n := e.h.Clients(e.sid); n != 0 {
		t.Fatalf("%d clients left attached by refusals", n)
	}
}

// TestRefusesMalformedRequests: a query that does not parse (url.Values
// dropped "types=%zz" and the stream was preset:full) and two
// Last-Event-ID headers with different values are 400 invalid_request,
// before anything is streamed; the same id twice is one.
func TestRefusesMalformedRequests(t *testing.T) {
	e := newEnv(t, hub.Config{}, sse.Config{})
	had := e.emit(event.TextDelta)
	other := e.emit(event.TextDelta)
	for _, c := range []struct {
		name, query string
		ids         []string
		status      int
	}{
		{"bad escape", "types=%zz", nil, 400},
		{"bad escape among good ones", "preset=chat&x=%zz", nil, 400},
		{"two different Last-Event-IDs", "", []string{had.ID, other.ID}, 400},
		{"the same Last-Event-ID twice", "", []string{had.ID, had.ID}, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, e.url(c.query), nil)
			for _, id := range c.ids {
				req.Header.Add(protocol.HeaderLastEventID, id)
			}
			ctx, cancel := context.WithCancel(e.ctx)
			defer cancel()
			resp, err := e.client.Do(req.WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if c.status == 200 {
				if resp.StatusCode != 200 {
					t.Fatalf("status %d", resp.StatusCode)
				}
				r := newReader(t, resp.Body)
				r.until(protocol.TypeSubscribeAck)
				if ev := r.mustNext(); ev.id != other.ID {
					t.Fatalf("resumed with %+v, want %s", ev, other.ID)
				}
				return
			}
			status, code, msg := errorOf(t, resp)
			if status != c.status || code != protocol.CodeInvalidRequest || msg == "" {
				t.Fatalf("%d %s %q; want %d %s", status, code, msg, c.status, protocol.CodeInvalidRequest)
			}
		})
	}
}

// TestResyncCloseFrame: a client the hub gives up (here a resync: an
// event of the session was lost) gets a last close frame with 1008
// storage_failure, then the response ends; its reconnect with its
// Last-Event-ID resumes.
func TestResyncCloseFrame(t *testing.T) {
	e := newEnv(t, hub.Config{}, sse.Config{})
	r := newReader(t, e.get("types=text.delta", "").Body)
	r.until(protocol.TypeSubscribeAck)
	had := e.emit(event.TextDelta)
	if ev := r.mustNext(); ev.id != had.ID {
		t.Fatalf("event %+v", ev)
	}
	e.h.Resync(e.sid)
	f := r.mustNext().frame(t)
	if f.Type != protocol.TypeClose || f.Close.Code != protocol.ClosePolicyViolation || f.Close.Reason.Code != protocol.ReasonStorageFailure.Code {
		t.Fatalf("last frame %+v", f)
	}
	if _, err := r.next(); err == nil {
		t.Fatal("the response goes on after the close frame")
	}
	missed := e.emit(event.TextDelta)
	r = newReader(t, e.get("types=text.delta", had.ID).Body)
	r.until(protocol.TypeSubscribeAck)
	if ev := r.mustNext(); ev.id != missed.ID {
		t.Fatalf("resumed with %+v, want %s", ev, missed.ID)
	}
}

// TestHeartbeatComments: an idle stream gets comment lines after each
// ping interval; they carry no data and no id.
func TestHeartbeatComments(t *testing.T) {
	e := newEnv(t, hub.Config{}, sse.Config{PingInterval: 10 * time.Millisecond})
	r := newReader(t, e.get("preset=chat", "").Body)
	r.until(protocol.TypeSubscribeAck)
	for range 3 {
		ev := r.mustNext()
		if len(ev.comments) != 1 || ev.comments[0] != "ping" || ev.data != "" || ev.hasID {
			t.Fatalf("heartbeat %+v", ev)
		}
	}
}

// TestNeverReadingClientDropped: a client that stops reading fills its
// socket (a few MiB on loopback), then its queue, here by its byte
// bound (the default 8 MiB, 32 of these events); the stalled write gets
// the overflow grace and the connection is cut (its write deadline
// moved to the past), long before the write timeout (a minute here):
// the client is detached and counted as a slow-client close.
func TestNeverReadingClientDropped(t *testing.T) {
	e := newEnv(t, hub.Config{ClientQueue: 100000, RingSize: -1}, sse.Config{WriteTimeout: time.Minute})
	conn, err := net.Dial("tcp", e.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /sessions/" + e.sid + "/events?types=text.delta HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// Wait for the subscription, then stream large deltas, never reading.
	for e.h.Clients(e.sid) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	big := strings.Repeat("x", 256<<10)
	for i := 0; e.h.Clients(e.sid) != 0; i++ {
		if i > 2000 {
			t.Fatal("the client was never dropped")
		}
		if _, err := e.em.EmitWait(e.ctx, bus.Spec{Type: event.TextDelta, Actor: event.ActorModel, Payload: map[string]string{"text": big}}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(timeout)
	for value(t, e.m.SlowCloses) != 1 || value(t, e.m.Clients) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("slow closes %v, clients %v", value(t, e.m.SlowCloses), value(t, e.m.Clients))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestOverflowCloseFrame: a client that stopped reading long enough
// for its queue to overflow (here by its byte bound, the default 8 MiB),
// and then reads again within the overflow grace (made long here, so
// that the test does not race it), gets what was written, then a last
// close frame: 1008 client_too_slow with what its queue held; then the
// response ends.
func TestOverflowCloseFrame(t *testing.T) {
	e := newEnv(t, hub.Config{ClientQueue: 100000, RingSize: -1},
		sse.Config{WriteTimeout: 2 * time.Minute, OverflowGrace: time.Minute})
	conn, err := net.Dial("tcp", e.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := http.NewRequest(http.MethodGet, e.url("types=text.delta"), nil)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	for e.h.Clients(e.sid) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	big := strings.Repeat("x", 256<<10)
	warned := func() bool {
		evs, err := e.st.Events(e.ctx, store.EventQuery{SessionIDs: []string{e.sid}, Types: []event.Type{event.BusHandlerWarning}})
		if err != nil {
			t.Fatal(err)
		}
		return len(evs) > 0
	}
	for i := 0; !warned(); i++ {
		if i > 2000 {
			t.Fatal("the queue never overflowed")
		}
		if _, err := e.em.EmitWait(e.ctx, bus.Spec{Type: event.TextDelta, Actor: event.ActorModel, Payload: map[string]string{"text": big}}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := newReader(t, resp.Body)
	var last sseEvent
	n := 0
	for {
		ev, err := r.next()
		if err != nil {
			break
		}
		last = ev
		n++
	}
	f := last.frame(t)
	if f.Type != protocol.TypeClose || f.Close.Code != protocol.ClosePolicyViolation || f.Close.Reason.Code != protocol.ReasonClientTooSlow.Code ||
		f.Close.Reason.QueueEvents == 0 || f.Close.Reason.QueueBytes <= 0 || f.Close.Reason.QueueBytes > hub.DefaultClientQueueBytes {
		t.Fatalf("after %d events, the last is %.300s", n, last.data)
	}
}

// TestCurl: curl -N is a working client: it prints the retry field, the
// ack, and on shutdown the close frame, and exits.
func TestCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	e := newEnv(t, hub.Config{}, sse.Config{})
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, curl, "-sN", e.url("preset=chat"))
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for e.h.Clients(e.sid) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	delta := e.emit(event.TextDelta)
	if err := e.srv.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("curl: %v; output:\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{"retry: 2000\n", `data: {"type":"subscribe_ack"`, "id: " + delta.ID + "\n",
		`data: {"type":"close","code":1001,"reason":{"code":"server_shutdown"`} {
		if !strings.Contains(got, want) {
			t.Fatalf("curl output lacks %q:\n%s", want, got)
		}
	}
	var ack protocol.SubscribeAck
	line := got[strings.Index(got, `data: {"type":"subscribe_ack"`)+len("data: "):]
	if err := json.Unmarshal([]byte(line[:strings.Index(line, "\n")]), &ack); err != nil {
		t.Fatalf("ack line: %v", err)
	}
}

// value reads a counter or gauge.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}
