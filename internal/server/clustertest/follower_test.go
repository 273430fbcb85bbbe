package clustertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

// A follower is a client of one session that behaves as the Go and
// TypeScript clients do across faults: it subscribes with a snapshot,
// then follows the stream, and whenever the connection ends (a close,
// a node paused or killed, a read that stalls) it reconnects, to the
// node its policy names, with the id of the last event it got as its
// cursor. It records every event in the order it got them, every
// streaming gap a subscribe_ack reported, the close reasons, and how
// long each subscribe waited for its answer, for checkDelivery.
type follower struct {
	name string
	sid  string
	// node returns the base URL of the node to connect to, for the
	// attempt-th connection (0: the first).
	node func(attempt int) string

	mu      sync.Mutex
	start   string // the first snapshot's seam: events after it are owed
	cursor  string
	got     []*protocol.EventEnvelope
	gaps    [][2]string // (cursor, seam] of a subscribe_ack with streaming_gap
	closes  []string    // why each connection ended
	answers []time.Duration
	conns   int
	pings   int           // heartbeats the server sent (and were answered)
	changed chan struct{} // closed and replaced when got grows

	// stop ends the follower and waits until it has, at most
	// followerStop.
	stop func() error
}

// Bounds of a follower's connections.
const (
	// followerDial bounds attaching and the WebSocket handshake.
	followerDial = 15 * time.Second
	// followerSilence is how long a follower waits for any frame before
	// it gives the connection up and reconnects: longer than a node's
	// bound on starting to follow a tree (30 s), so a slow first follow
	// is answered rather than abandoned and asked again.
	followerSilence = 45 * time.Second
	// followerStop bounds how long a follower takes to stop once its
	// test ended: it closes its connection at once, so this is only a
	// guard against a follower stuck elsewhere.
	followerStop = 10 * time.Second
)

// follow starts a follower of sid; it runs until the test ends.
func follow(t *testing.T, name, sid string, node func(attempt int) string) *follower {
	t.Helper()
	f := &follower{name: name, sid: sid, node: node, changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.run(ctx)
	}()
	var once sync.Once
	f.stop = func() (stopErr error) { // the error once, to the first caller
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(followerStop):
				f.mu.Lock()
				defer f.mu.Unlock()
				stopErr = fmt.Errorf("follower %s did not stop within %s of its test's end (%d connections, ends %q)", f.name, followerStop, f.conns, f.closes)
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := f.stop(); err != nil {
			t.Error(err)
		}
	})
	return f
}

// waitSubscribed waits until the follower's first subscribe was
// answered (every event after that is owed to it), failing the test
// after timeout.
func (f *follower) waitSubscribed(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f.mu.Lock()
		n := len(f.answers)
		f.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower %s: its subscribe was not answered within %s (%s)", f.name, timeout, f.summary())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitPings waits until the server sent the follower n heartbeats,
// failing the test after timeout.
func (f *follower) waitPings(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f.mu.Lock()
		got := f.pings
		f.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower %s: %d of %d heartbeats within %s (%s)", f.name, got, n, timeout, f.summary())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// on returns a node policy that always picks base.
func on(base string) func(int) string { return func(int) string { return base } }

func (f *follower) run(ctx context.Context) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		why := f.connect(ctx, f.node(attempt))
		f.mu.Lock()
		f.closes = append(f.closes, why)
		f.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// connect runs one connection and returns why it ended.
func (f *follower) connect(ctx context.Context, base string) string {
	dctx, cancel := context.WithTimeout(ctx, followerDial)
	defer cancel()
	began := time.Now()
	ws, err := dialStream(dctx, base, f.sid)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer ws.CloseNow()
	// The follower stops when its test ends, whatever the connection
	// does: a read of a connection the server keeps alive with pings
	// would not time out.
	defer context.AfterFunc(ctx, func() { ws.CloseNow() })()
	ws.SetReadLimit(64 << 20)
	f.mu.Lock()
	f.conns++
	cursor := f.cursor
	f.mu.Unlock()
	sub := map[string]any{"type": protocol.TypeSubscribe, "filter": "preset:full", "snapshot": cursor == ""}
	if cursor != "" {
		sub["since"] = cursor
	}
	b, _ := json.Marshal(sub)
	if err := ws.Write(dctx, websocket.MessageText, b); err != nil {
		return "subscribe: " + err.Error()
	}
	c := &streamtest.Client{WS: ws, SessionID: f.sid, AutoPong: true}
	answered := false
	for {
		fr, err := c.TryRead(followerSilence)
		if err != nil {
			if end, ok := streamtest.EndOf(err); ok {
				return fmt.Sprintf("closed %d %s", end.Code, end.Reason)
			}
			if ctx.Err() != nil {
				return "stopped"
			}
			return "read: " + err.Error()
		}
		if !answered && (fr.Ack != nil || fr.Err != nil) {
			answered = true
			f.mu.Lock()
			f.answers = append(f.answers, time.Since(began))
			f.mu.Unlock()
		}
		switch {
		case fr.Type == protocol.TypePing:
			f.mu.Lock()
			f.pings++
			f.mu.Unlock()
		case fr.Err != nil:
			return "refused " + fr.Err.Code
		case fr.Ack != nil:
			if fr.Ack.StreamingGap {
				f.mu.Lock()
				f.gaps = append(f.gaps, [2]string{cursor, fr.Ack.SeamEventID})
				f.mu.Unlock()
			}
		case fr.Snap != nil:
			f.mu.Lock()
			if f.start == "" {
				f.start = fr.Snap.SnapshotAtEventID
			}
			f.cursor = max(f.cursor, fr.Snap.SnapshotAtEventID)
			f.mu.Unlock()
		case fr.Event != nil:
			f.mu.Lock()
			f.got = append(f.got, fr.Event)
			f.cursor = fr.Event.ID
			close(f.changed)
			f.changed = make(chan struct{})
			f.mu.Unlock()
		}
	}
}

// dialStream attaches to a session's stream on base, bounded by ctx
// (streamtest.Dial is not: a paused node would hold it forever).
func dialStream(ctx context.Context, base, sid string) (*websocket.Conn, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sessions/"+sid, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /sessions/%s: %s", sid, resp.Status)
	}
	var info struct {
		WSURL string `json:"ws_url"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return nil, err
	}
	ws, _, err := websocket.Dial(ctx, info.WSURL, nil)
	return ws, err
}

// waitFor waits until pred holds for what the follower got, failing the
// test after timeout.
func (f *follower) waitFor(t *testing.T, what string, timeout time.Duration, pred func([]*protocol.EventEnvelope) bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		ok := pred(f.got)
		ch := f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("follower %s: %s: not within %s (%d events, %d connections, ends %q)", f.name, what, timeout, len(f.got), f.conns, f.closes)
		}
	}
}

// deltasOf returns a predicate: at least n text deltas of turn.
func deltasOf(turn string, n int) func([]*protocol.EventEnvelope) bool {
	return func(evs []*protocol.EventEnvelope) bool {
		k := 0
		for _, e := range evs {
			if e.Type == string(event.TextDelta) && e.TurnID != nil && *e.TurnID == turn {
				k++
			}
		}
		return k >= n
	}
}

// sawType returns a predicate: an event of typ of turn.
func sawType(typ event.Type, turn string) func([]*protocol.EventEnvelope) bool {
	until := streamtest.UntilType(typ, turn)
	return func(evs []*protocol.EventEnvelope) bool {
		for _, e := range evs {
			if until(e) {
				return true
			}
		}
		return false
	}
}

// delivery counts what one follower got wrong against the log.
type delivery struct {
	Lost, Duplicated, Misordered, Late int
	// Excused: streaming events the follower did not get after a
	// subscribe_ack told it of a streaming gap there.
	Excused int
	// Examples of each fault, for the failure message.
	Examples []string
}

func (d delivery) ok() bool { return d.Lost+d.Duplicated+d.Misordered+d.Late == 0 }

func (d *delivery) note(format string, args ...any) {
	if len(d.Examples) < 12 {
		d.Examples = append(d.Examples, fmt.Sprintf(format, args...))
	}
}

// validEvents returns the session's events of the log in stream order
// that a client may receive: all but those of a turn that come after
// the turn's terminal event (a deposed owner's late events).
func validEvents(logged []*event.Event, sid string) []*event.Event {
	ended := map[string]bool{}
	var out []*event.Event
	for _, e := range logged {
		if e.SessionID != sid {
			continue
		}
		if e.TurnID != "" && ended[e.TurnID] {
			continue
		}
		if e.Type == event.TurnCompleted || e.Type == event.TurnCancelled {
			ended[e.TurnID] = true
		}
		out = append(out, e)
	}
	return out
}

// checkDelivery compares what a follower got, from its first snapshot
// to the last event it got at most through upTo, with the events it is
// owed, valid (the valid events of the log, validEvents, or what the
// owner's own client got): every one of them exactly once and in order
// (lost, duplicated, misordered), nothing else (late: an event that is
// not among them, such as a deposed owner's delta after its turn
// ended, or one the log never held, or an event of a turn after the
// turn's end). A streaming event after a cursor the server answered
// with streaming_gap, up to that subscribe's seam, may be missing
// (excused).
func checkDelivery(f *follower, valid []*event.Event, upTo string) delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	var d delivery
	isValid := map[string]bool{}
	for _, e := range valid {
		isValid[e.ID] = true
	}
	seen := map[string]bool{}
	ended := map[string]bool{}
	last := ""
	for _, e := range f.got {
		if e.ID > upTo {
			break
		}
		switch {
		case seen[e.ID]:
			d.Duplicated++
			d.note("duplicated %s %s", e.Type, e.ID)
		case e.ID <= last:
			d.Misordered++
			d.note("misordered %s %s after %s", e.Type, e.ID, last)
		}
		turn := ""
		if e.TurnID != nil {
			turn = *e.TurnID
		}
		if !isValid[e.ID] || turn != "" && ended[turn] {
			d.Late++
			d.note("late %s %s (turn %s)", e.Type, e.ID, turn)
		}
		if e.Type == string(event.TurnCompleted) || e.Type == string(event.TurnCancelled) {
			ended[turn] = true
		}
		seen[e.ID] = true
		last = max(last, e.ID)
	}
	for _, e := range valid {
		if e.ID <= f.start || e.ID > upTo || seen[e.ID] {
			continue
		}
		if event.FamilyOf(e.Type) == event.Streaming && f.excusedLocked(e.ID) {
			d.Excused++
			continue
		}
		d.Lost++
		d.note("lost %s %s", e.Type, e.ID)
	}
	return d
}

func (f *follower) excusedLocked(id string) bool {
	for _, g := range f.gaps {
		if id > g[0] && id <= g[1] {
			return true
		}
	}
	return false
}

// summary describes the follower's connections for a log line.
func (f *follower) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("%d events over %d connections; subscribes answered in %v; ends %q; gaps %v", len(f.got), f.conns, f.answers, f.closes, f.gaps)
}

// events returns a copy of what the follower got, in order.
func (f *follower) events() []*protocol.EventEnvelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*protocol.EventEnvelope(nil), f.got...)
}

// slowestAnswer is the longest a subscribe of the follower waited for
// its answer.
func (f *follower) slowestAnswer() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var m time.Duration
	for _, a := range f.answers {
		m = max(m, a)
	}
	return m
}
