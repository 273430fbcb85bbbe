package hub_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

func decodeSnapshot(t tb, b []byte) protocol.Snapshot {
	t.Helper()
	var s protocol.Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("snapshot frame %s: %v", b, err)
	}
	if s.Type != protocol.TypeSnapshot {
		t.Fatalf("snapshot frame type %q", s.Type)
	}
	if s.Messages == nil {
		t.Fatalf("snapshot frame without a messages list: %s", b)
	}
	return s
}

// summary is the part of the snapshot's session object the tests check.
type summary struct {
	ID                string  `json:"id"`
	WorkspacePath     string  `json:"workspace_path"`
	ActiveModel       string  `json:"active_model"`
	CurrentTurnID     *string `json:"current_turn_id"`
	CurrentTurnStatus *string `json:"current_turn_status"`
}

// written is a message the test committed with an event.
type written struct {
	msgID, eventID string
}

func newMessage(sid, id, turn string) message.Message {
	return message.Message{ID: id, SessionID: sid, TurnID: turn, Role: message.RoleUser,
		Content: []message.Block{message.Text("text of " + id)}, Status: message.StatusComplete, CreatedAt: time.Now().UTC()}
}

// TestSnapshotAsOfSeam: a snapshot attach returns a frame stamped with
// the seam whose messages are exactly the newest SnapshotMessages of
// those committed with an event at or before the seam (oldest first),
// has_more_messages telling whether older ones exist, and whose
// current_turn_id follows turn.started / turn.completed / turn.cancelled
// up to the seam; live items are exactly the events after it. Another
// goroutine keeps committing messages while the snapshots are taken.
func TestSnapshotAsOfSeam(t *testing.T) {
	st := openStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(0, 6).Draw(rt, "snapshotMessages")
		e := newEnv(rt, st, hub.Config{SnapshotMessages: limit, ClientQueue: 1 << 20})

		var mu sync.Mutex
		var msgs []written // in commit order
		put := func(typ event.Type, turn string) error {
			// Hold mu across the emit so msgs is in id order.
			mu.Lock()
			defer mu.Unlock()
			id := event.NewID("msg_")
			ev, err := e.emit(typ, event.ActorAgent, turn, store.PutMessage{Message: newMessage(e.sid, id, turn)})
			if err == nil {
				msgs = append(msgs, written{msgID: id, eventID: ev.ID})
			}
			return err
		}

		background := rapid.IntRange(0, 30).Draw(rt, "background")
		done := make(chan error, 1)
		go func() {
			for range background {
				if err := put(event.ToolCalled, "turn_bg"); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()

		type snap struct {
			att   *hub.Attachment
			frame protocol.Snapshot
		}
		var snaps []snap
		turn := 0
		for i := range rapid.IntRange(1, 30).Draw(rt, "steps") {
			switch rapid.IntRange(0, 5).Draw(rt, fmt.Sprintf("op%d", i)) {
			case 0: // a turn starts, with its user message
				turn++
				if err := put(event.TurnStarted, fmt.Sprintf("turn_%d", turn)); err != nil {
					rt.Fatalf("emit: %v", err)
				}
			case 1: // the newest turn ends (or a stale one: no effect)
				typ := rapid.SampledFrom([]event.Type{event.TurnCompleted, event.TurnCancelled}).Draw(rt, fmt.Sprintf("end%d", i))
				which := turn - rapid.IntRange(0, 1).Draw(rt, fmt.Sprintf("stale%d", i))
				e.mustEmit(typ, event.ActorAgent, fmt.Sprintf("turn_%d", which))
			case 2:
				if err := put(event.LLMCallStarted, fmt.Sprintf("turn_%d", turn)); err != nil {
					rt.Fatalf("emit: %v", err)
				}
			case 3:
				e.mustEmit(event.TextDelta, event.ActorModel, fmt.Sprintf("turn_%d", turn))
			case 4:
				e.barrier()
			case 5:
				att := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Snapshot: true})
				snaps = append(snaps, snap{att: att, frame: decodeSnapshot(rt, att.Snapshot)})
			}
		}
		att := e.subscribe(protocol.Subscribe{Preset: event.PresetFull, Snapshot: true})
		snaps = append(snaps, snap{att: att, frame: decodeSnapshot(rt, att.Snapshot)})
		if err := <-done; err != nil {
			rt.Fatalf("background emit: %v", err)
		}
		e.barrier()
		all := e.all()

		for k, s := range snaps {
			seam := s.att.Seam
			if s.att.Replay != nil || s.att.Ack.ReplayEventCount != 0 || !s.att.Ack.Snapshot {
				rt.Fatalf("snapshot %d: ack %+v with %d replayed", k, s.att.Ack, len(s.att.Replay))
			}
			// Messages as of the seam.
			var asOf []string
			for _, w := range msgs {
				if w.eventID <= seam {
					asOf = append(asOf, w.msgID)
				}
			}
			want, more := asOf, false
			if len(want) > limit {
				want, more = want[len(want)-limit:], true
			}
			var got []string
			for _, raw := range s.frame.Messages {
				var m message.Message
				if err := json.Unmarshal(raw, &m); err != nil {
					rt.Fatalf("snapshot %d: message %s: %v", k, raw, err)
				}
				if m.SessionID != e.sid || m.PlainText() != "text of "+m.ID {
					rt.Fatalf("snapshot %d: message %s", k, raw)
				}
				got = append(got, m.ID)
			}
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				rt.Fatalf("snapshot %d at %s (limit %d): messages\n got  %v\n want %v", k, seam, limit, got, want)
			}
			if s.frame.HasMoreMessages != more {
				rt.Fatalf("snapshot %d: has_more_messages %v, want %v (%d as of seam, limit %d)", k, s.frame.HasMoreMessages, more, len(asOf), limit)
			}
			// The current turn as of the seam.
			cur := ""
			for _, ev := range all {
				if ev.ID > seam {
					break
				}
				switch ev.Type {
				case event.TurnStarted:
					cur = ev.TurnID
				case event.TurnCompleted, event.TurnCancelled:
					if ev.TurnID == cur {
						cur = ""
					}
				}
			}
			var sum summary
			if err := json.Unmarshal(s.frame.Session, &sum); err != nil {
				rt.Fatalf("snapshot %d: session %s: %v", k, s.frame.Session, err)
			}
			if sum.ID != e.sid || sum.WorkspacePath != "/work/"+e.sid || sum.ActiveModel != "test:model" {
				rt.Fatalf("snapshot %d: session %s", k, s.frame.Session)
			}
			switch {
			case cur == "" && (sum.CurrentTurnID != nil || sum.CurrentTurnStatus != nil):
				rt.Fatalf("snapshot %d: current turn %s, want none", k, s.frame.Session)
			case cur != "" && (sum.CurrentTurnID == nil || *sum.CurrentTurnID != cur || sum.CurrentTurnStatus == nil || *sum.CurrentTurnStatus != "in_flight"):
				rt.Fatalf("snapshot %d: session %s, want current turn %s in flight", k, s.frame.Session, cur)
			}
			// Live: everything after the seam.
			sameEvents(rt, fmt.Sprintf("snapshot %d live", k), drain(rt, s.att), expect(all, matcher{preset: event.PresetFull}, seam, ""))
		}
	})
}

// TestSnapshotEmptySession: a session with no events yet snapshots at
// the empty seam with no messages, and the first event is live.
func TestSnapshotEmptySession(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, st, hub.Config{SnapshotMessages: 5})
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat, Snapshot: true})
	s := decodeSnapshot(t, att.Snapshot)
	if s.SnapshotAtEventID != "" || len(s.Messages) != 0 || s.HasMoreMessages {
		t.Fatalf("snapshot of an empty session: %s", att.Snapshot)
	}
	ev := e.mustEmit(event.TurnStarted, event.ActorSession, "turn_1")
	e.barrier()
	sameEvents(t, "live", drain(t, att), []*event.Event{ev})
}

// TestSnapshotWorkers: a snapshot folds the session's delegate.* events
// as of its seam into one entry per worker, oldest first, keeping the
// latest 100; events after the seam are left to the live stream.
func TestSnapshotWorkers(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, st, hub.Config{SnapshotMessages: 5})
	emit := func(typ event.Type, p map[string]any) {
		t.Helper()
		if _, err := e.em.Emit(bus.Spec{Type: typ, Actor: "tool", TurnID: "turn_1", Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	emit(event.TurnStarted, map[string]any{})
	for i := range 103 {
		w := fmt.Sprintf("sess_w%03d", i)
		emit(event.DelegateStarted, map[string]any{"worker_session_id": w, "task": "task " + w, "model": "builtin:demo"})
		switch i % 3 {
		case 0:
			emit(event.DelegateCompleted, map[string]any{"worker_session_id": w, "success": true, "summary": "done", "cost_usd": 0.5})
		case 1:
			emit(event.DelegateFailed, map[string]any{"worker_session_id": w, "failure_mode": "timeout", "cost_usd": 0.25})
		}
	}
	e.barrier()
	att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat, Snapshot: true})
	emit(event.DelegateCompleted, map[string]any{"worker_session_id": "sess_w101", "success": true, "summary": "later"})
	e.barrier()
	s := decodeSnapshot(t, att.Snapshot)
	if len(s.Workers) != 100 || s.Workers[0].SessionID != "sess_w003" || s.Workers[99].SessionID != "sess_w102" {
		t.Fatalf("%d workers, from %+v to %+v", len(s.Workers), s.Workers[0], s.Workers[len(s.Workers)-1])
	}
	want := map[string]protocol.SnapshotWorker{
		"sess_w099": {SessionID: "sess_w099", Task: "task sess_w099", Model: "builtin:demo", Status: "completed", Summary: "done", CostUSD: 0.5},
		"sess_w100": {SessionID: "sess_w100", Task: "task sess_w100", Model: "builtin:demo", Status: "failed", FailureMode: "timeout", CostUSD: 0.25},
		"sess_w101": {SessionID: "sess_w101", Task: "task sess_w101", Model: "builtin:demo", Status: "running"},
	}
	for _, w := range s.Workers {
		if x, ok := want[w.SessionID]; ok && w != x {
			t.Errorf("worker %+v, want %+v", w, x)
		}
	}
}
