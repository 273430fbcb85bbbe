package clusterbench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
)

// The deltas the benchmarks emit carry a sequence number in their text
// ("#00000042 the quick"), which the clients parse to match each frame
// with its emit time.

const deltaMsgID = "msg_01JCLUSTERBENCHCLUSTERBENC"

// deltaPayload is the agent's text.delta payload (internal/agent).
type deltaPayload struct {
	MessageID string `json:"message_id"`
	Index     int    `json:"content_block_index"`
	Text      string `json:"text"`
}

func deltaText(seq int) string { return fmt.Sprintf("#%08d the quick", seq) }

// deltaTexts precomputes n delta texts, so the emit loop formats nothing.
func deltaTexts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = deltaText(i)
	}
	return out
}

// emitDelta is the model adapter's emit of one text delta.
func emitDelta(em *bus.Emitter, text string) error {
	_, err := em.Emit(bus.Spec{Type: event.TextDelta, TurnID: "turn_bench", Actor: event.ActorModel,
		Payload: deltaPayload{MessageID: deltaMsgID, Text: text}})
	return err
}

// settle emits one delta (one the clients do not count) and waits
// until it is delivered on the emitting node: every event emitted
// before it (the clients' bus.subscriber_registered, committed through
// the log in cluster mode) is committed and delivered by then.
func settle(tb testing.TB, em *bus.Emitter) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := em.EmitWait(ctx, bus.Spec{Type: event.TextDelta, TurnID: "turn_bench", Actor: event.ActorModel,
		Payload: deltaPayload{MessageID: deltaMsgID, Text: "settled"}}); err != nil {
		tb.Fatal(err)
	}
}

var deltaKey = []byte(`"text":"#`)

// deltaSeq returns the sequence number of a delta frame, or -1.
func deltaSeq(frame []byte) int {
	i := bytes.Index(frame, deltaKey)
	if i < 0 || len(frame) < i+len(deltaKey)+8 {
		return -1
	}
	n := 0
	for _, c := range frame[i+len(deltaKey) : i+len(deltaKey)+8] {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// errNotFound is dial's error when the node does not show the session.
var errNotFound = errors.New("no such session (yet)")

// dial attaches to a session on node n (GET /sessions/{id}, then the
// WebSocket), subscribes with the event types and since (if not empty),
// and returns the connection and the raw subscribe_ack.
func dial(ctx context.Context, n *node, sid string, types []string, since string) (*websocket.Conn, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.url+"/sessions/"+sid, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := n.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	var info struct {
		WSURL string `json:"ws_url"`
	}
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil, fmt.Errorf("GET /sessions/%s on %s: %w", sid, n.name, errNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET /sessions/%s on %s: %s", sid, n.name, resp.Status)
	}
	if err != nil {
		return nil, nil, err
	}
	return subscribe(ctx, info.WSURL, types, since)
}

// subscribe opens the WebSocket, sends the subscribe frame and reads
// the subscribe_ack.
func subscribe(ctx context.Context, wsURL string, types []string, since string) (*websocket.Conn, []byte, error) {
	ws, _, err := websocket.Dial(ctx, wsURL, nil)
	if err != nil {
		return nil, nil, err
	}
	sub := map[string]any{"type": "subscribe", "filter": map[string]any{"event_types": types}, "snapshot": false, "since": nil}
	if since != "" {
		sub["since"] = since
	}
	b, err := json.Marshal(sub)
	if err == nil {
		err = ws.Write(ctx, websocket.MessageText, b)
	}
	var ack []byte
	if err == nil {
		_, ack, err = ws.Read(ctx)
	}
	if err == nil && !bytes.Contains(ack, []byte(`"subscribe_ack"`)) {
		err = fmt.Errorf("want subscribe_ack, got %s", ack)
	}
	if err != nil {
		ws.CloseNow()
		return nil, nil, err
	}
	return ws, ack, nil
}

// sample is one delta frame a client read.
type sample struct {
	seq int32
	at  int64 // ns since the reader's base
}

// reader reads one connection on its own goroutine, recording the
// receive time of every delta frame, until the connection ends.
type reader struct {
	ws      *websocket.Conn
	node    int // index of the node it is a client of
	base    time.Time
	got     atomic.Int64
	samples []sample // written by the reader goroutine only; read after it exits
	exited  chan struct{}
	err     error
}

func newReader(ws *websocket.Conn, node int, base time.Time, capacity int) *reader {
	r := &reader{ws: ws, node: node, base: base, samples: make([]sample, 0, capacity), exited: make(chan struct{})}
	go r.run()
	return r
}

func (r *reader) run() {
	defer close(r.exited)
	buf := make([]byte, 4096)
	for {
		_, rd, err := r.ws.Reader(context.Background())
		if err != nil {
			r.err = err
			return
		}
		n := 0
		for {
			if n == len(buf) {
				buf = append(buf, make([]byte, len(buf))...)
			}
			m, err := rd.Read(buf[n:])
			n += m
			if err == io.EOF {
				break
			}
			if err != nil {
				r.err = err
				return
			}
		}
		at := int64(time.Since(r.base))
		if seq := deltaSeq(buf[:n]); seq >= 0 {
			r.samples = append(r.samples, sample{int32(seq), at})
			r.got.Add(1)
		}
	}
}

// waitGot waits until every reader got at least n deltas.
func waitGot(rs []*reader, n int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, r := range rs {
		for r.got.Load() < n {
			select {
			case <-r.exited:
				return fmt.Errorf("a client ended after %d of %d deltas: close status %d: %v", r.got.Load(), n, websocket.CloseStatus(r.err), r.err)
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("timed out: a client got %d of %d deltas", r.got.Load(), n)
			}
			time.Sleep(500 * time.Microsecond)
		}
	}
	return nil
}

// closeReaders closes the connections and waits for the readers.
func closeReaders(rs []*reader) {
	for _, r := range rs {
		r.ws.CloseNow()
	}
	for _, r := range rs {
		<-r.exited
	}
}

// latencies returns the sorted latencies (µs) of the deltas with
// sequence numbers in [from, to) of the readers accepted by keep (nil:
// all), given each delta's emit time.
func latencies(rs []*reader, emitAt []int64, from, to int, keep func(*reader) bool) []float64 {
	var out []float64
	for _, r := range rs {
		if keep != nil && !keep(r) {
			continue
		}
		for _, s := range r.samples {
			if int(s.seq) >= from && int(s.seq) < to {
				out = append(out, float64(s.at-emitAt[s.seq])/1e3)
			}
		}
	}
	slices.Sort(out)
	return out
}

// quantile of sorted xs (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
