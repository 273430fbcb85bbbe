package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/config"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/servertest"
	"github.com/metis-agent/metis/internal/streamtest"
	"github.com/metis-agent/metis/protocol"
)

var record = flag.Bool("record", false, "record the cases' traces from a live server (then run -update and review)")

const wait = 20 * time.Second

// recorder keeps every frame a client reads, in order, with a marker
// line at the start of each connection.
type recorder struct {
	t     *testing.T
	lines [][]byte
	conns int
}

func (r *recorder) connect(h *servertest.Harness, sid string) *streamtest.Client {
	r.conns++
	r.lines = append(r.lines, []byte(fmt.Sprintf(`{"type":"_connection","n":%d}`, r.conns)))
	return streamtest.Attach(r.t, h.URL, sid)
}

// read reads frames until pred holds for one (inclusive).
func (r *recorder) read(c *streamtest.Client, pred func(streamtest.Frame) bool) streamtest.Frame {
	for {
		f := c.Read(wait)
		r.lines = append(r.lines, f.Raw)
		if pred(f) {
			return f
		}
	}
}

func isType(typ string) func(streamtest.Frame) bool {
	return func(f streamtest.Frame) bool { return f.Type == typ }
}

func isEvent(typ event.Type) func(streamtest.Frame) bool {
	return func(f streamtest.Frame) bool { return f.Event != nil && f.Event.Type == string(typ) }
}

func (r *recorder) save(name string) {
	dir := filepath.Join("cases", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "frames.jsonl"), append(bytes.Join(r.lines, []byte("\n")), '\n'), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func subscribe(c *streamtest.Client, filter any, since *string, snapshot bool) {
	c.Subscribe(filter, since, snapshot)
}

// begin starts a server with a session and a recorded client attached
// with preset:chat and a snapshot.
func begin(t *testing.T, opts ...servertest.Option) (*servertest.Harness, string, *recorder, *streamtest.Client) {
	h := servertest.Start(t, "", opts...)
	sid := h.CreateSession()
	r := &recorder{t: t}
	c := r.connect(h, sid)
	subscribe(c, "preset:chat", nil, true)
	r.read(c, isType(protocol.TypeSnapshot))
	return h, sid, r, c
}

// TestRecordCases regenerates every case from a live server. Run it
// with -record, then -update, and review the diff of cases/.
func TestRecordCases(t *testing.T) {
	if !*record {
		t.Skip("run with -record to regenerate the traces")
	}
	slow := func(c *config.Config) { c.DemoDelay = 3 * time.Millisecond }

	t.Run("plain_turn", func(t *testing.T) {
		h, sid, r, c := begin(t)
		h.Submit(sid, "/echo Hello! This is a plain turn, streamed word by word.")
		r.read(c, isEvent(event.TurnCompleted))
		r.save("plain_turn")
	})

	t.Run("tools_and_thinking", func(t *testing.T) {
		h, sid, r, c := begin(t)
		h.Submit(sid, "What is in this workspace?")
		r.read(c, isEvent(event.TurnCompleted))
		r.save("tools_and_thinking")
	})

	t.Run("cancel_during_llm", func(t *testing.T) {
		h, sid, r, c := begin(t, slow)
		turn := h.Submit(sid, "/long 200")
		n := 0
		r.read(c, func(f streamtest.Frame) bool {
			if f.Event != nil && f.Event.Type == "text.delta" {
				n++
			}
			return n == 12
		})
		c.Send(map[string]any{"type": "cancel", "turn_id": turn, "reason": "user_cancel"})
		r.read(c, isEvent(event.TurnCancelled))
		r.save("cancel_during_llm")
	})

	t.Run("cancel_during_tool", func(t *testing.T) {
		h, sid, r, c := begin(t)
		turn := h.Submit(sid, `/tool shell {"command": "exec sleep 60"}`)
		r.read(c, isEvent(event.ToolCalled))
		c.Send(map[string]any{"type": "cancel", "turn_id": turn, "reason": "user_cancel"})
		r.read(c, isEvent(event.TurnCancelled))
		r.save("cancel_during_tool")
	})

	t.Run("cancel_at_seam", func(t *testing.T) {
		h := servertest.Start(t, "")
		seam := make(chan struct{}, 1)
		h.Server.Loop.SetBeforeTools(func(ctx context.Context, _ string) { seam <- struct{}{}; <-ctx.Done() })
		sid := h.CreateSession()
		r := &recorder{t: t}
		c := r.connect(h, sid)
		subscribe(c, "preset:chat", nil, true)
		r.read(c, isType(protocol.TypeSnapshot))
		turn := h.Submit(sid, `/tool shell {"command": "touch never"}`)
		<-seam
		c.Send(map[string]any{"type": "cancel", "turn_id": turn, "reason": "user_cancel"})
		r.read(c, isEvent(event.TurnCancelled))
		r.save("cancel_at_seam")
	})

	t.Run("reconnect_with_replay", func(t *testing.T) {
		h, sid, r, c := begin(t, slow)
		h.Submit(sid, "/long 60")
		n := 0
		last := r.read(c, func(f streamtest.Frame) bool {
			if f.Event != nil && f.Event.Type == "text.delta" {
				n++
			}
			return n == 20
		})
		c.WS.CloseNow()
		time.Sleep(50 * time.Millisecond) // the turn goes on while we are away
		c2 := r.connect(h, sid)
		since := last.Event.ID
		subscribe(c2, "preset:chat", &since, false)
		r.read(c2, isEvent(event.TurnCompleted))
		r.save("reconnect_with_replay")
	})

	t.Run("streaming_gap", func(t *testing.T) {
		h := servertest.Start(t, "", slow, func(c *config.Config) { c.StreamRing = 5 })
		sid := h.CreateSession()
		r := &recorder{t: t}
		c := r.connect(h, sid)
		subscribe(c, "preset:chat", nil, true)
		r.read(c, isType(protocol.TypeSnapshot))
		h.Submit(sid, "/long 40")
		n := 0
		last := r.read(c, func(f streamtest.Frame) bool {
			if f.Event != nil && f.Event.Type == "text.delta" {
				n++
			}
			return n == 10
		})
		c.WS.CloseNow()
		h.WaitTurn(sid)
		// The ring kept only 5 deltas: the ack says streaming_gap, the
		// replay has every catalog event; the client then resyncs.
		c2 := r.connect(h, sid)
		since := last.Event.ID
		subscribe(c2, "preset:chat", &since, false)
		r.read(c2, isEvent(event.TurnCompleted))
		c2.WS.CloseNow()
		c3 := r.connect(h, sid)
		subscribe(c3, "preset:chat", nil, true)
		r.read(c3, isType(protocol.TypeSnapshot))
		r.save("streaming_gap")
	})

	t.Run("workers", func(t *testing.T) {
		h := servertest.Start(t, "")
		sid := h.CreateSession()
		r := &recorder{t: t}
		c := r.connect(h, sid)
		all, _ := event.Preset(event.PresetChat)
		var types []string
		for _, x := range all {
			types = append(types, string(x))
		}
		subscribe(c, protocol.Filter{EventTypes: types, IncludeWorkerSessions: true}, nil, true)
		r.read(c, isType(protocol.TypeSnapshot))
		b, _ := json.Marshal(map[string]string{"task": "/echo The worker did its part."})
		turn := h.Submit(sid, "/tool delegate "+string(b))
		r.read(c, func(f streamtest.Frame) bool {
			return f.Event != nil && f.Event.Type == "turn.completed" && f.Event.TurnID != nil && *f.Event.TurnID == turn
		})
		r.save("workers")
	})

	t.Run("unknown_event_type", func(t *testing.T) {
		src, err := os.ReadFile(filepath.Join("cases", "plain_turn", "frames.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(src)), "\n")
		r := &recorder{t: t}
		for i, l := range lines {
			r.lines = append(r.lines, []byte(l))
			if i == len(lines)/2 {
				var f struct {
					Event protocol.EventEnvelope `json:"event"`
				}
				json.Unmarshal([]byte(l), &f)
				id := f.Event.ID
				if id == "" {
					continue
				}
				// A type from a future catalog, with an id after its neighbour.
				r.lines = append(r.lines, []byte(fmt.Sprintf(`{"type":"event","event":{"id":"%s~","type":"future.thing","session_id":"%s","turn_id":null,"ts":"2026-11-22T00:00:00Z","actor":"agent","payload":{"x":1}}}`, id, f.Event.SessionID)))
			}
		}
		r.save("unknown_event_type")
	})
}
