package hub_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/metis-agent/metis/internal/bus"
	"github.com/metis-agent/metis/internal/event"
	"github.com/metis-agent/metis/internal/hub"
	"github.com/metis-agent/metis/internal/message"
	"github.com/metis-agent/metis/internal/store"
	"github.com/metis-agent/metis/protocol"
)

// TestSnapshotRunningTools: a snapshot taken while tools run lists the
// calls of the turn in flight that had started and not ended at its
// seam, in the order they started: not one that ended, not one not yet
// started, not another turn's left open, not one started after the seam
// (that one arrives live). Without a turn in flight it lists none.
func TestSnapshotRunningTools(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, st, hub.Config{SnapshotMessages: 5})
	tool := func(typ event.Type, turn, id string, ops ...store.Op) {
		t.Helper()
		if _, err := e.em.Emit(bus.Spec{Type: typ, Actor: event.ActorTool, TurnID: turn,
			Payload: map[string]any{"tool_use_id": id, "tool_name": "shell"}, Ops: ops}); err != nil {
			t.Fatal(err)
		}
	}
	// An earlier turn's call that never ended (its process died), then the turn in flight.
	e.mustEmit(event.TurnStarted, event.ActorSession, "turn_0")
	tool(event.ToolCalled, "turn_0", "tu_old")
	e.mustEmit(event.TurnCompleted, event.ActorSession, "turn_0")
	e.mustEmit(event.TurnStarted, event.ActorSession, "turn_1")
	uses := []message.Block{}
	for _, id := range []string{"tu_a", "tu_b", "tu_c", "tu_d"} {
		uses = append(uses, message.Block{Type: message.BlockToolUse, ID: id, Name: "shell", Input: json.RawMessage(`{}`)})
	}
	asked := message.Message{ID: "msg_1", SessionID: e.sid, TurnID: "turn_1", Role: message.RoleAssistant,
		Content: uses, Status: message.StatusComplete, CreatedAt: time.Now().UTC()}
	e.mustEmit(event.LLMCallCompleted, event.ActorModel, "turn_1", store.PutMessage{Message: asked})
	tool(event.ToolCalled, "turn_1", "tu_b")
	tool(event.ToolCalled, "turn_1", "tu_a")
	tool(event.ToolCalled, "turn_1", "tu_c")
	tool(event.ToolCompleted, "turn_1", "tu_b")
	e.barrier()

	att := e.subscribe(protocol.Subscribe{Preset: event.PresetChat, Snapshot: true})
	tool(event.ToolCalled, "turn_1", "tu_d") // after the seam
	e.barrier()
	if got, want := decodeSnapshot(t, att.Snapshot).RunningTools, []string{"tu_a", "tu_c"}; !slices.Equal(got, want) {
		t.Fatalf("running tools %q, want %q", got, want)
	}

	// Every call answered and the turn over: none.
	tool(event.ToolCompleted, "turn_1", "tu_a")
	tool(event.ToolFailed, "turn_1", "tu_c")
	tool(event.ToolCompleted, "turn_1", "tu_d")
	e.mustEmit(event.TurnCompleted, event.ActorSession, "turn_1")
	e.barrier()
	if got := decodeSnapshot(t, e.subscribe(protocol.Subscribe{Preset: event.PresetChat, Snapshot: true}).Snapshot).RunningTools; got != nil {
		t.Fatalf("running tools after the turn: %q", got)
	}
}
